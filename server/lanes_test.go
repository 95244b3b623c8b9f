package server_test

import (
	"slices"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/internal/servertest"
	"github.com/prefixroute/prefixroute/scheduler"
)

// TestPickShortLane: through gRPC, with short_lanes 1 the instance with
// the smallest lane key (idle here, so otherwise the best) refuses a long
// prompt (short_lane) and takes a short one, at the full and chosen
// audits, and its audit says short_lane; an out-of-range short_lanes is
// refused with the field's range.
func TestPickShortLane(t *testing.T) {
	e := servertest.Start(t)
	defer e.Stop()
	ids := []string{"a", "b", "c"}
	lane := slices.MinFunc(ids, func(x, y string) int {
		kx, ky := scheduler.LaneKey(x), scheduler.LaneKey(y)
		return map[bool]int{true: -1, false: 1}[kx < ky]
	})
	for _, id := range ids {
		r := rep("m", "d", id)
		if id != lane {
			r.QueueMs = f64(100)
		}
		report(e, r)
	}
	if _, err := e.Admin.SetPolicy(ctx(t), &pb.SetPolicyRequest{Pool: "m",
		Policy: &pb.Policy{ShortLanes: proto.Uint32(1), ShortLaneMaxPrefillMs: f64(50)}}); err != nil {
		t.Fatal(err)
	}
	for _, level := range []pb.AuditLevel{pb.AuditLevel_AUDIT_LEVEL_FULL, pb.AuditLevel_AUDIT_LEVEL_CHOSEN} {
		// 4,096 tokens at 10,000 tokens/s: over 400 ms of prefill, a long one.
		long, err := e.Pick.Pick(ctx(t), &pb.PickRequest{Pool: "m", PromptTokens: 4096, Seed: u64(1), Audit: level})
		if err != nil {
			t.Fatal(err)
		}
		if long.GetInstanceId() == lane {
			t.Fatalf("%v: the long prompt went to the lane instance %s", level, lane)
		}
		if level == pb.AuditLevel_AUDIT_LEVEL_FULL {
			if in := instanceByID(t, long.GetDecision(), lane); !in.GetShortLane() || in.GetExcludedReason() != "short_lane" {
				t.Fatalf("lane instance %s: short_lane %v, excluded_reason %q", lane, in.GetShortLane(), in.GetExcludedReason())
			}
		}
		// 64 tokens: 6.4 ms, the lane takes it, and it is idle.
		short, err := e.Pick.Pick(ctx(t), &pb.PickRequest{Pool: "m", PromptTokens: 64, Seed: u64(1), Audit: level})
		if err != nil {
			t.Fatal(err)
		}
		if short.GetInstanceId() != lane {
			t.Fatalf("%v: the short prompt went to %s, want the idle lane instance %s", level, short.GetInstanceId(), lane)
		}
		if in := instanceByID(t, short.GetDecision(), lane); !in.GetShortLane() || in.GetExcludedReason() != "" {
			t.Fatalf("%v: lane instance %s: short_lane %v, excluded_reason %q", level, lane, in.GetShortLane(), in.GetExcludedReason())
		}
	}
	_, err := e.Admin.SetPolicy(ctx(t), &pb.SetPolicyRequest{Pool: "m", Policy: &pb.Policy{ShortLanes: proto.Uint32(9)}})
	wantCode(t, err, codes.InvalidArgument, "short_lanes must be in [0, 8] instances, got 9")
}
