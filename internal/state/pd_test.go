package state

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/prefixroute/prefixroute/internal/readiness"
	"github.com/prefixroute/prefixroute/scheduler"
)

// TestPickDisaggregatedAccounting: a disaggregated pick adds the prefill
// work to the prefill instance, none to the decode one, and records the
// request's blocks as cached on both (neither reports cache events); a
// local pick adds it to the decode instance as before. Both audit levels.
func TestPickDisaggregatedAccounting(t *testing.T) {
	for _, chosen := range []bool{false, true} {
		_, p := newTestPool(t, Limits{})
		cfg := DefaultConfig()
		cfg.Policy.DoublingContextTokens = 0
		p.SetConfig(cfg)
		// The decode instance's queue makes remote prefill pay: 100 ms
		// against 0 on the prefill instance.
		connect(t, p, t0, "a", "dec", &Report{Role: scheduler.RoleDecode, HasQueueMs: true, QueueMs: 100})
		connect(t, p, t0, "a", "pre", &Report{Role: scheduler.RolePrefill, HasQueueMs: true})
		hashes := make([]uint64, 128)
		for i := range hashes {
			hashes[i] = uint64(1000 + i)
		}
		in := PickInput{Hashes: hashes, PromptTokens: 2048, ChosenOnly: chosen}
		var pk Pick
		if err := p.Pick(t0, &in, rand.New(rand.NewPCG(1, 2)), &pk); err != nil {
			t.Fatal(err)
		}
		d := &pk.Decision
		if pk.Snapshot.Instances[d.Instance].ID != "dec" || d.PD.Reason != scheduler.PDDisaggregated ||
			pk.Snapshot.Instances[d.PD.Prefill].ID != "pre" || d.PD.PrefillProbability != 1 {
			t.Fatalf("chosen %v: instance %d, PD %+v", chosen, d.Instance, d.PD)
		}
		if dec, pre := pk.Work(); dec != 0 || pre != 2048 {
			t.Fatalf("Work() = %d, %d; want 0, 2048", dec, pre)
		}
		if !pk.Approximate || !pk.ApproximatePrefill {
			t.Fatalf("approximate %v/%v, want both", pk.Approximate, pk.ApproximatePrefill)
		}
		if got := p.byID["pre"].assigned; got != 2048 {
			t.Fatalf("prefill assigned %d tokens, want 2048", got)
		}
		if got := p.byID["dec"].assigned; got != 0 {
			t.Fatalf("decode assigned %d tokens, want 0", got)
		}
		// Both now hold the prefix: the next identical request is cached
		// on the decode instance, below the threshold, local.
		if err := p.Pick(t0, &in, rand.New(rand.NewPCG(1, 2)), &pk); err != nil {
			t.Fatal(err)
		}
		if pk.Decision.PD.Reason != scheduler.PDBelowThreshold || pk.Snapshot.Instances[pk.Decision.Instance].MatchedBlocks != 128 {
			t.Fatalf("second pick: PD %+v, matched %d", pk.Decision.PD, pk.Snapshot.Instances[pk.Decision.Instance].MatchedBlocks)
		}
		if p.byID["pre"].assigned != 2048 || p.byID["dec"].assigned != 0 {
			t.Fatalf("second pick assigned %d / %d, want 2048 / 0 (a fully cached prompt is 0 work)", p.byID["pre"].assigned, p.byID["dec"].assigned)
		}
		mustInvariants(t, p)
	}
}

// TestReportRoleRefused: an unknown role is refused by ValidateReport.
func TestReportRoleRefused(t *testing.T) {
	r := NewRegistry(Limits{})
	if err := r.ValidateReport(&Report{Role: scheduler.RoleDecode}); err != nil {
		t.Fatal(err)
	}
	if err := r.ValidateReport(&Report{Role: scheduler.RoleDecode + 1}); err == nil {
		t.Fatal("role 4 accepted")
	}
}

// TestMigrationBothSides: a disaggregated To is ready to absorb traffic
// only while it has an eligible prefill and an eligible decode instance.
func TestMigrationBothSides(t *testing.T) {
	_, p := newTestPool(t, Limits{})
	connect(t, p, t0, "a", "a1", &Report{PrefillTokensPerSecond: 10000})
	connect(t, p, t0, "b", "b-dec", &Report{Role: scheduler.RoleDecode, PrefillTokensPerSecond: 10000})
	pre := connect(t, p, t0, "b", "b-pre", &Report{Role: scheduler.RolePrefill, PrefillTokensPerSecond: 10000})
	missing := func() string {
		t.Helper()
		st, err := p.Migration(t0, readiness.Query{From: "a", To: "b"})
		if err != nil {
			t.Fatal(err)
		}
		return st.Migration.ToMissing
	}
	if m := missing(); m != "" {
		t.Fatalf("both sides up: missing %q", m)
	}
	pre.Close(t0)
	if m := missing(); m != "no eligible prefill instance (of 1)" {
		t.Fatalf("prefill disconnected: missing %q", m)
	}
}

// TestPickPDRunningRequests: the decode instance's reported running
// requests reach the snapshot and the prefill stage's interference term.
// Both instances idle, 2048 uncached tokens: local 204.8 ms against
// 215.04 ms remote stays local with 0 running; 2 running add 0.05 × 2 ×
// 204.8 = 20.48 ms and disaggregate; a report of 0 running makes it local
// again. Both audit levels.
func TestPickPDRunningRequests(t *testing.T) {
	for _, chosen := range []bool{false, true} {
		_, p := newTestPool(t, Limits{})
		cfg := DefaultConfig()
		cfg.Policy.DoublingContextTokens = 0
		cfg.Policy.PDInterferenceWeight = 0.05
		p.SetConfig(cfg)
		dec := connect(t, p, t0, "a", "dec", &Report{Seq: 1, Role: scheduler.RoleDecode, HasQueueMs: true})
		pre := connect(t, p, t0, "a", "pre", &Report{Seq: 1, Role: scheduler.RolePrefill, HasQueueMs: true})
		hashes := make([]uint64, 128)
		for i := range hashes {
			hashes[i] = uint64(5000 + i)
		}
		for i, tc := range []struct {
			running      uint32
			reason       scheduler.PDReason
			interference float64
		}{
			{0, scheduler.PDLocalCheaper, 0},
			{2, scheduler.PDDisaggregated, 20.48},
			{0, scheduler.PDLocalCheaper, 0},
		} {
			// Each pick follows fresh reports of idle instances (a report
			// ends the work the router assigned since the last one).
			now := t0.Add(time.Duration(i+1) * time.Second)
			if err := dec.Report(now, &Report{Seq: uint64(i + 2), Role: scheduler.RoleDecode, HasQueueMs: true, RunningRequests: tc.running}); err != nil {
				t.Fatal(err)
			}
			if err := pre.Report(now, &Report{Seq: uint64(i + 2), Role: scheduler.RolePrefill, HasQueueMs: true}); err != nil {
				t.Fatal(err)
			}
			// A fresh prompt each time: nothing cached anywhere.
			for j := range hashes {
				hashes[j] += 1000
			}
			in := PickInput{Hashes: hashes, PromptTokens: 2048, ChosenOnly: chosen}
			var pk Pick
			if err := p.Pick(now, &in, rand.New(rand.NewPCG(1, 2)), &pk); err != nil {
				t.Fatal(err)
			}
			d := &pk.Decision
			pd := &d.PD
			if pk.Snapshot.Instances[d.Instance].ID != "dec" || pk.Snapshot.Instances[d.Instance].RunningRequests != tc.running ||
				pd.Reason != tc.reason || pd.RunningRequests != tc.running ||
				math.Abs(pd.InterferenceMs-tc.interference) > 1e-9 || math.Abs(pd.LocalMs-204.8) > 1e-9 ||
				math.Abs(pd.RemoteMs-215.04) > 1e-9 {
				t.Fatalf("chosen %v, report %d (%d running): instance %d, PD %+v", chosen, i, tc.running, d.Instance, pd)
			}
		}
		mustInvariants(t, p)
	}
}
