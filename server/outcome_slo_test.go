package server_test

import (
	"math"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/internal/protoconv"
	"github.com/prefixroute/prefixroute/internal/servertest"
)

// TestPickSLO: through gRPC, a target sends the pick to the instance
// predicted to meet it (the other is slo_miss), records it, picks best
// effort when none meets it, and sheds with SLO_UNATTAINABLE and the best
// predicted TTFT under on_slo_miss shed, at every audit level.
func TestPickSLO(t *testing.T) {
	e := servertest.Start(t)
	defer e.Stop()
	a, b := rep("m", "d", "a"), rep("m", "d", "b")
	a.QueueMs, b.QueueMs = f64(10), f64(100)
	report(e, a)
	report(e, b)

	// 50 ms: a (10 ms) meets it, b (100 ms) does not and is never drawn.
	for seed := range uint64(20) {
		resp, err := e.Pick.Pick(ctx(t), &pb.PickRequest{Pool: "m", Seed: u64(seed), TtftSloMs: 50})
		if err != nil {
			t.Fatal(err)
		}
		dec := resp.GetDecision()
		if resp.GetInstanceId() != "a" || !dec.GetSloMet() || dec.GetTtftSloMs() != 50 {
			t.Fatalf("seed %d: picked %s, slo_met %v, ttft_slo_ms %v; want a, true, 50", seed, resp.GetInstanceId(), dec.GetSloMet(), dec.GetTtftSloMs())
		}
		if r := instanceByID(t, dec, "b").GetExcludedReason(); r != "slo_miss" {
			t.Fatalf("b's excluded_reason %q, want slo_miss", r)
		}
	}
	// Best effort: a target nobody meets picks as without one.
	resp, err := e.Pick.Pick(ctx(t), &pb.PickRequest{Pool: "m", Seed: u64(1), TtftSloMs: 5})
	if err != nil {
		t.Fatalf("best effort: %v", err)
	}
	if resp.GetDecision().GetSloMet() || resp.GetDecision().GetPolicy().GetOnSloMiss() != pb.SloOnMiss_SLO_ON_MISS_BEST_EFFORT {
		t.Fatalf("best effort: slo_met %v, policy %v", resp.GetDecision().GetSloMet(), resp.GetDecision().GetPolicy().GetOnSloMiss())
	}

	if _, err := e.Admin.SetPolicy(ctx(t), &pb.SetPolicyRequest{Pool: "m", Policy: &pb.Policy{OnSloMiss: pb.SloOnMiss_SLO_ON_MISS_SHED}}); err != nil {
		t.Fatal(err)
	}
	for _, level := range []pb.AuditLevel{pb.AuditLevel_AUDIT_LEVEL_FULL, pb.AuditLevel_AUDIT_LEVEL_CHOSEN, pb.AuditLevel_AUDIT_LEVEL_NONE} {
		_, err := e.Pick.Pick(ctx(t), &pb.PickRequest{Pool: "m", TtftSloMs: 5, Audit: level})
		wantCode(t, err, codes.ResourceExhausted, `pool "m" cannot meet ttft_slo_ms 5`, "best predicted TTFT of an eligible instance is 10.0 ms")
		if r := protoconv.ReasonOf(err); r != protoconv.ReasonSLOUnattainable {
			t.Fatalf("%v: reason %q", level, r)
		}
		md := errorInfo(t, err).GetMetadata()
		if md["best_predicted_ttft_ms"] != "10" || md["ttft_slo_ms"] != "5" || md["pool"] != "m" {
			t.Fatalf("%v: metadata %v", level, md)
		}
		if resp, err := e.Pick.Pick(ctx(t), &pb.PickRequest{Pool: "m", TtftSloMs: 10, Audit: level}); err != nil || resp.GetInstanceId() != "a" {
			t.Fatalf("%v: target 10 ms (a meets it exactly): %v, %v", level, resp.GetInstanceId(), err)
		}
	}
	for _, bad := range []float64{-1, math.NaN(), math.Inf(1), 3_600_001} {
		_, err := e.Pick.Pick(ctx(t), &pb.PickRequest{Pool: "m", TtftSloMs: bad})
		wantCode(t, err, codes.InvalidArgument, "ttft_slo_ms is", "want 0 (no target) or a number of ms in (0, 3600000]")
	}
}

// errorInfo returns err's ErrorInfo detail.
func errorInfo(t *testing.T, err error) *errdetails.ErrorInfo {
	t.Helper()
	for _, d := range status.Convert(err).Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			return info
		}
	}
	t.Fatalf("%v carries no ErrorInfo", err)
	return nil
}
