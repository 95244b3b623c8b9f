package scheduler_test

import (
	"testing"

	"github.com/prefixroute/prefixroute/scheduler"
)

// TestDecidePDSLOMet: a disaggregated pick meets a TTFT target by the
// prefill instance's prediction plus the KV transfer, not by the decode
// instance's local prefill: local 304.8 ms, remote 204.8 + 10.24 =
// 215.04 ms.
func TestDecidePDSLOMet(t *testing.T) {
	for _, tt := range []struct {
		name   string
		target float64
		reason scheduler.PDReason
		met    bool
	}{
		{"local misses, remote meets", 250, scheduler.PDDisaggregated, true},
		{"both miss", 200, scheduler.PDDisaggregated, false},
		{"both meet", 400, scheduler.PDDisaggregated, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			snap := &scheduler.Snapshot{Deployments: deps(1), Instances: []scheduler.Instance{
				pdInst("dec", 0, scheduler.RoleDecode, 100, 0), pdInst("p0", 0, scheduler.RolePrefill, 0, 0)}}
			req := pdReq
			req.TTFTTargetMs = tt.target
			var d scheduler.Decision
			if err := scheduler.Decide(pdPolicy(nil), req, snap, draws(0, 0, 0), &d); err != nil {
				t.Fatal(err)
			}
			if d.PD.Reason != tt.reason || d.SLOMet != tt.met {
				t.Fatalf("PD %v, SLOMet %v; want %v, %v", d.PD.Reason, d.SLOMet, tt.reason, tt.met)
			}
		})
	}
}

// TestDecidePDInterference: an idle decode instance prefills 2048 uncached
// tokens in 204.8 ms, against 204.8 ms + 10.24 ms of transfer on an idle
// prefill instance, so without running requests it stays local. Each of
// its running requests adds weight × 204.8 ms to the local side: at 0.05,
// one request ties (10.24 ms, 215.04 ≤ 215.04: local) and two flip it to
// disaggregated (20.48 ms, 225.28 > 215.04); at the default 0.1 one does.
// Below the threshold only the stall itself is weighed against the remote
// path (PDResult.stallsLocal).
func TestDecidePDInterference(t *testing.T) {
	dec := func(running uint32, matched int) scheduler.Instance {
		in := pdInst("dec", 0, scheduler.RoleDecode, 0, matched)
		in.RunningRequests = running
		return in
	}
	weight := func(w float64) *scheduler.Policy {
		return pdPolicy(func(p *scheduler.Policy) { p.PDInterferenceWeight = w })
	}
	tests := []struct {
		name         string
		pol          *scheduler.Policy
		dec          scheduler.Instance
		reason       scheduler.PDReason
		local        float64
		interference float64
		remote       float64
	}{
		{name: "no running requests: local", pol: pdPolicy(nil), dec: dec(0, 0),
			reason: scheduler.PDLocalCheaper, local: 204.8, interference: 0, remote: 215.04},
		{name: "weight 0.05, 1 running: tie stays local", pol: weight(0.05), dec: dec(1, 0),
			reason: scheduler.PDLocalCheaper, local: 204.8, interference: 10.24, remote: 215.04},
		{name: "weight 0.05, 2 running: disaggregated", pol: weight(0.05), dec: dec(2, 0),
			reason: scheduler.PDDisaggregated, local: 204.8, interference: 20.48, remote: 215.04},
		{name: "default weight 0.1, 1 running: disaggregated", pol: pdPolicy(nil), dec: dec(1, 0),
			reason: scheduler.PDDisaggregated, local: 204.8, interference: 20.48, remote: 215.04},
		{name: "weight 0 ignores 64 running", pol: weight(0), dec: dec(64, 0),
			reason: scheduler.PDLocalCheaper, local: 204.8, interference: 0, remote: 215.04},
		{name: "weight 0.01, 5 running: 10.24 ms, tie stays local", pol: weight(0.01), dec: dec(5, 0),
			reason: scheduler.PDLocalCheaper, local: 204.8, interference: 10.24, remote: 215.04},
		{name: "weight 0.01, 6 running: disaggregated", pol: weight(0.01), dec: dec(6, 0),
			reason: scheduler.PDDisaggregated, local: 204.8, interference: 12.288, remote: 215.04},
		// Below the threshold (128 uncached tokens, 12.8 ms) a pick stays
		// local until its stall alone costs more than the remote path
		// (204.8 + 0.64 ms): 0.25 × 64 × 12.8 = 204.8 ms does not,
		// 0.251 × 64 × 12.8 = 205.6192 ms does.
		{name: "below threshold, default weight, 64 running: local", pol: pdPolicy(nil), dec: dec(64, 120),
			reason: scheduler.PDBelowThreshold, local: 12.8, interference: 81.92, remote: 204.8 + 0.64},
		{name: "below threshold, stall 204.8 ms <= remote: local", pol: weight(0.25), dec: dec(64, 120),
			reason: scheduler.PDBelowThreshold, local: 12.8, interference: 204.8, remote: 204.8 + 0.64},
		{name: "below threshold, stall 205.6192 ms > remote: disaggregated", pol: weight(0.251), dec: dec(64, 120),
			reason: scheduler.PDDisaggregated, local: 12.8, interference: 205.6192, remote: 204.8 + 0.64},
		{name: "below threshold, weight 100: disaggregated", pol: weight(100), dec: dec(64, 120),
			reason: scheduler.PDDisaggregated, local: 12.8, interference: 81920, remote: 204.8 + 0.64},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snap := &scheduler.Snapshot{Deployments: deps(1), Instances: []scheduler.Instance{
				tt.dec, pdInst("p0", 0, scheduler.RolePrefill, 0, 0)}}
			var d scheduler.Decision
			if err := scheduler.Decide(tt.pol, pdReq, snap, draws(0, 0, 0.5), &d); err != nil {
				t.Fatalf("Decide: %v", err)
			}
			checkInvariants(t, snap, &d, nil, 1e-12)
			pd := d.PD
			if pd.Reason != tt.reason || pd.RunningRequests != tt.dec.RunningRequests {
				t.Fatalf("PD = %+v, want reason %v, %d running", pd, tt.reason, tt.dec.RunningRequests)
			}
			near(t, "LocalMs", pd.LocalMs, tt.local, 1e-9)
			near(t, "InterferenceMs", pd.InterferenceMs, tt.interference, 1e-9)
			near(t, "LocalCostMs", pd.LocalCostMs(), tt.local+tt.interference, 1e-9)
			near(t, "RemoteMs", pd.RemoteMs, tt.remote, 1e-9)
			if tt.reason == scheduler.PDDisaggregated && snap.Instances[pd.Prefill].ID != "p0" {
				t.Fatalf("prefill %d, want p0", pd.Prefill)
			}
		})
	}
}
