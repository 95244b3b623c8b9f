package server_test

import (
	"testing"

	"google.golang.org/grpc/codes"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/internal/servertest"
)

// TestPickSaturation: with every instance excluded for load, Pick answers
// with the least loaded one under on_saturation least_loaded (the default),
// saying so in the audit, and ResourceExhausted with the reasons and the
// earliest drain time under shed.
func TestPickSaturation(t *testing.T) {
	e := servertest.Start(t)
	for _, in := range []struct {
		id      string
		kv, qms float64
	}{{"a", 0.99, 40}, {"b", 0.97, 15}, {"c", 1, 30}} {
		r := rep("m", "d", in.id)
		r.KvCacheUsage, r.QueueMs = in.kv, f64(in.qms)
		report(e, r)
	}
	for _, audit := range []pb.AuditLevel{pb.AuditLevel_AUDIT_LEVEL_FULL, pb.AuditLevel_AUDIT_LEVEL_CHOSEN} {
		resp, err := e.Pick.Pick(ctx(t), &pb.PickRequest{Pool: "m", Audit: audit})
		if err != nil {
			t.Fatalf("audit %v: %v", audit, err)
		}
		dec := resp.GetDecision()
		if resp.GetInstanceId() != "b" || !dec.GetSaturated() || dec.GetDrainMs() != 15 {
			t.Fatalf("audit %v: picked %q, saturated %v, drain %v ms; want b, true, 15", audit, resp.GetInstanceId(), dec.GetSaturated(), dec.GetDrainMs())
		}
		if r := instanceByID(t, dec, "b").GetExcludedReason(); r != "" {
			t.Fatalf("chosen b has excluded_reason %q", r)
		}
		if audit == pb.AuditLevel_AUDIT_LEVEL_FULL {
			for _, id := range []string{"a", "c"} {
				if r := instanceByID(t, dec, id).GetExcludedReason(); r != "kv_full" {
					t.Fatalf("%s: excluded_reason %q, want kv_full", id, r)
				}
			}
		}
	}
	resp, err := e.Admin.SetPolicy(ctx(t), &pb.SetPolicyRequest{AllowNewPool: true, Pool: "m", Policy: &pb.Policy{OnSaturation: pb.OnSaturation_ON_SATURATION_SHED}})
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.GetPolicy().GetOnSaturation(); got != pb.OnSaturation_ON_SATURATION_SHED {
		t.Fatalf("SetPolicy answered on_saturation %v", got)
	}
	_, err = e.Pick.Pick(ctx(t), &pb.PickRequest{Pool: "m"})
	wantCode(t, err, codes.ResourceExhausted, `pool "m" is saturated`, "3 kv_full", "drains in about 15.0 ms", "on_saturation: shed")

	_, err = e.Admin.SetPolicy(ctx(t), &pb.SetPolicyRequest{AllowNewPool: true, Pool: "m", Policy: &pb.Policy{OnSaturation: 9}})
	wantCode(t, err, codes.InvalidArgument, "on_saturation must be least_loaded, shed or queue, got 9")
}
