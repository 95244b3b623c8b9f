package protoconv

import (
	"testing"

	"google.golang.org/protobuf/proto"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/internal/state"
	"github.com/prefixroute/prefixroute/scheduler"
)

// TestPDProto: the prefill stage's audit carries every PDResult field,
// the interference term included, so that local_ms + interference_ms
// against remote_ms reproduces the reason; the prefill choice only for a
// disaggregated pick; nothing for an aggregated one.
func TestPDProto(t *testing.T) {
	snap := scheduler.Snapshot{Instances: []scheduler.Instance{{ID: "dec"}, {ID: "pre", Role: scheduler.RolePrefill}}}
	addrs := []string{"10.0.0.1:8000", "10.0.0.2:8000"}
	for _, tc := range []struct {
		name        string
		pd          scheduler.PDResult
		wantPrefill *pb.PdPrefill
		wantAudit   *pb.PdDecision
	}{
		{name: "aggregated", pd: scheduler.PDResult{Reason: scheduler.PDNone, Prefill: -1}},
		{name: "disaggregated by interference",
			pd: scheduler.PDResult{Reason: scheduler.PDDisaggregated, Prefill: 1, PrefillProbability: 1, PrefillDraw: 0.5,
				PrefillInstances: 1, PrefillEligible: 1, UncachedTokens: 2048, LocalMs: 204.8, RemoteMs: 215.04,
				TransferMs: 10.24, RunningRequests: 2, InterferenceMs: 20.48},
			wantPrefill: &pb.PdPrefill{Address: "10.0.0.2:8000", InstanceId: "pre", Probability: 1},
			wantAudit: &pb.PdDecision{Reason: "disaggregated", PrefillInstanceId: "pre", PrefillProbability: 1, PrefillDraw: 0.5,
				PrefillInstances: 1, PrefillEligible: 1, UncachedTokens: 2048, LocalMs: 204.8, RemoteMs: 215.04,
				TransferMs: 10.24, RunningRequests: 2, InterferenceMs: 20.48}},
		{name: "local cheaper with interference",
			pd: scheduler.PDResult{Reason: scheduler.PDLocalCheaper, Prefill: -1, PrefillInstances: 1, PrefillEligible: 1,
				UncachedTokens: 2048, LocalMs: 204.8, RemoteMs: 215.04, TransferMs: 10.24, RunningRequests: 1, InterferenceMs: 10.24},
			wantAudit: &pb.PdDecision{Reason: "local_cheaper", PrefillInstances: 1, PrefillEligible: 1, UncachedTokens: 2048,
				LocalMs: 204.8, RemoteMs: 215.04, TransferMs: 10.24, RunningRequests: 1, InterferenceMs: 10.24}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pk := &state.Pick{Snapshot: snap, Addresses: addrs}
			pk.Decision.PD = tc.pd
			prefill, audit := PDProto(pk, true)
			if !proto.Equal(prefill, tc.wantPrefill) || (prefill == nil) != (tc.wantPrefill == nil) {
				t.Errorf("prefill = %v, want %v", prefill, tc.wantPrefill)
			}
			if !proto.Equal(audit, tc.wantAudit) || (audit == nil) != (tc.wantAudit == nil) {
				t.Errorf("audit = %v, want %v", audit, tc.wantAudit)
			}
			if p, a := PDProto(pk, false); !proto.Equal(p, tc.wantPrefill) || a != nil {
				t.Errorf("without audit: %v, %v; want %v, nil", p, a, tc.wantPrefill)
			}
		})
	}
}
