package scheduler_test

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/prefixroute/prefixroute/scheduler"
)

// pdInst returns an instance of deployment dep with role, queue_ms and
// matched blocks; its ID says all three.
func pdInst(id string, dep int, role scheduler.Role, queueMs float64, matched int) scheduler.Instance {
	return scheduler.Instance{ID: id, Deployment: dep, Role: role, HasQueueMs: true, QueueMs: queueMs, MatchedBlocks: matched}
}

// pdPolicy is the default policy with the attention term off, so that a
// prefill of u tokens costs exactly u × 0.1 ms (10,000 tokens/s).
func pdPolicy(f func(*scheduler.Policy)) *scheduler.Policy {
	return policy(func(p *scheduler.Policy) {
		p.DoublingContextTokens = 0
		if f != nil {
			f(p)
		}
	})
}

// A 2048-token prompt of 128 blocks: 204.8 ms of prefill when uncached,
// 10.24 ms of transfer at the default 0.005 ms a token.
var pdReq = scheduler.Request{PromptTokens: 2048, Blocks: 128}

func TestDecidePD(t *testing.T) {
	dec := func(queueMs float64, matched int) scheduler.Instance {
		return pdInst("dec", 0, scheduler.RoleDecode, queueMs, matched)
	}
	pre := func(id string, queueMs float64) scheduler.Instance {
		return pdInst(id, 0, scheduler.RolePrefill, queueMs, 0)
	}
	stale := pre("p-stale", 0)
	stale.Disconnected = true
	full := pre("p-full", 0)
	full.KVUsage = 0.99
	tests := []struct {
		name      string
		pol       *scheduler.Policy
		insts     []scheduler.Instance
		draws     []float64
		wantErr   error
		reason    scheduler.PDReason
		prefill   string // "" when none
		prob      float64
		calls     int
		local     float64
		remote    float64
		uncached  uint32
		eligibleP int
	}{
		{name: "disaggregated, cheapest prefill drawn", pol: pdPolicy(nil),
			insts: []scheduler.Instance{dec(100, 0), pre("p0", 0), pre("p1", 20)}, draws: []float64{0, 0, 0.5},
			reason: scheduler.PDDisaggregated, prefill: "p0", prob: 2.0 / 3, calls: 3,
			local: 304.8, remote: 215.04, uncached: 2048, eligibleP: 2},
		{name: "disaggregated, second prefill drawn (softmax 2/3, 1/3)", pol: pdPolicy(nil),
			insts: []scheduler.Instance{dec(100, 0), pre("p0", 0), pre("p1", 20)}, draws: []float64{0, 0, 0.7},
			reason: scheduler.PDDisaggregated, prefill: "p1", prob: 1.0 / 3, calls: 3,
			local: 304.8, remote: 215.04, uncached: 2048, eligibleP: 2},
		{name: "below threshold: 128 uncached < 512", pol: pdPolicy(nil),
			insts: []scheduler.Instance{dec(100, 120), pre("p0", 0)}, draws: []float64{0, 0, 0.5},
			reason: scheduler.PDBelowThreshold, calls: 2, local: 112.8, remote: 204.8 + 0.64, uncached: 128, eligibleP: 1},
		{name: "threshold 0 still needs one uncached token", pol: pdPolicy(func(p *scheduler.Policy) { p.PDMinUncachedTokens = 0 }),
			insts:  []scheduler.Instance{dec(500, 128), pre("p0", 0)},
			reason: scheduler.PDBelowThreshold, calls: 2, local: 500, remote: 204.8, uncached: 0, eligibleP: 1},
		{name: "local cheaper: idle decode", pol: pdPolicy(nil),
			insts:  []scheduler.Instance{dec(0, 0), pre("p0", 0)},
			reason: scheduler.PDLocalCheaper, calls: 2, local: 204.8, remote: 215.04, uncached: 2048, eligibleP: 1},
		{name: "local cheaper: slow transfer", pol: pdPolicy(func(p *scheduler.Policy) { p.PDTransferMsPerToken = 0.1 }),
			insts:  []scheduler.Instance{dec(100, 0), pre("p0", 0)},
			reason: scheduler.PDLocalCheaper, calls: 2, local: 304.8, remote: 409.6, uncached: 2048, eligibleP: 1},
		{name: "no prefill instance: local fallback", pol: pdPolicy(nil),
			insts:  []scheduler.Instance{dec(100, 0), stale},
			reason: scheduler.PDNoPrefillInstance, calls: 2, local: 304.8, uncached: 2048},
		{name: "prefill saturated: local fallback", pol: pdPolicy(nil),
			insts:  []scheduler.Instance{dec(100, 0), stale, full},
			reason: scheduler.PDPrefillSaturated, calls: 2, local: 304.8, uncached: 2048},
		{name: "no prefill instance: fail", pol: pdPolicy(func(p *scheduler.Policy) { p.PDFallback = scheduler.PDFallbackFail }),
			insts: []scheduler.Instance{dec(100, 0), stale}, wantErr: scheduler.ErrNoPrefillInstance,
			reason: scheduler.PDNoPrefillInstance, calls: 2, local: 304.8, uncached: 2048},
		{name: "prefill saturated: fail", pol: pdPolicy(func(p *scheduler.Policy) { p.PDFallback = scheduler.PDFallbackFail }),
			insts: []scheduler.Instance{dec(100, 0), full}, wantErr: scheduler.ErrPrefillSaturated,
			reason: scheduler.PDPrefillSaturated, calls: 2, local: 304.8, uncached: 2048},
		{name: "fail fallback does not fail a short prompt", pol: pdPolicy(func(p *scheduler.Policy) { p.PDFallback = scheduler.PDFallbackFail }),
			insts:  []scheduler.Instance{dec(100, 100), stale},
			reason: scheduler.PDBelowThreshold, calls: 2, local: 144.8, uncached: 448},
		// pd_mode always: neither the threshold nor a cheaper local prefill
		// keeps a pick on its decode instance; the fallback still decides.
		{name: "always: fully cached prompt", pol: pdPolicy(func(p *scheduler.Policy) { p.PDMode = scheduler.PDAlways }),
			insts: []scheduler.Instance{dec(500, 128), pre("p0", 0)}, draws: []float64{0, 0, 0.5},
			reason: scheduler.PDDisaggregated, prefill: "p0", prob: 1, calls: 3, local: 500, remote: 204.8, uncached: 0, eligibleP: 1},
		{name: "always: short prompt", pol: pdPolicy(func(p *scheduler.Policy) { p.PDMode = scheduler.PDAlways }),
			insts: []scheduler.Instance{dec(100, 120), pre("p0", 0)}, draws: []float64{0, 0, 0.5},
			reason: scheduler.PDDisaggregated, prefill: "p0", prob: 1, calls: 3, local: 112.8, remote: 204.8 + 0.64, uncached: 128, eligibleP: 1},
		{name: "always: local cheaper", pol: pdPolicy(func(p *scheduler.Policy) { p.PDMode = scheduler.PDAlways }),
			insts: []scheduler.Instance{dec(0, 0), pre("p0", 0)}, draws: []float64{0, 0, 0.5},
			reason: scheduler.PDDisaggregated, prefill: "p0", prob: 1, calls: 3, local: 204.8, remote: 215.04, uncached: 2048, eligibleP: 1},
		{name: "always: no prefill instance, local fallback", pol: pdPolicy(func(p *scheduler.Policy) { p.PDMode = scheduler.PDAlways }),
			insts:  []scheduler.Instance{dec(100, 100), stale},
			reason: scheduler.PDNoPrefillInstance, calls: 2, local: 144.8, uncached: 448},
		{name: "always: no prefill instance, fail", pol: pdPolicy(func(p *scheduler.Policy) {
			p.PDMode, p.PDFallback = scheduler.PDAlways, scheduler.PDFallbackFail
		}),
			insts: []scheduler.Instance{dec(100, 100), stale}, wantErr: scheduler.ErrNoPrefillInstance,
			reason: scheduler.PDNoPrefillInstance, calls: 2, local: 144.8, uncached: 448},
		{name: "argmin prefill", pol: pdPolicy(func(p *scheduler.Policy) { p.Strategy = scheduler.Argmin }),
			insts: []scheduler.Instance{dec(100, 0), pre("p0", 5), pre("p1", 0)}, draws: []float64{0, 0, 0},
			reason: scheduler.PDDisaggregated, prefill: "p1", prob: 1, calls: 3,
			local: 304.8, remote: 215.04, uncached: 2048, eligibleP: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snap := &scheduler.Snapshot{Deployments: deps(1), Instances: tt.insts}
			rng := draws(tt.draws...)
			var d scheduler.Decision
			err := scheduler.Decide(tt.pol, pdReq, snap, rng, &d)
			if !errors.Is(err, tt.wantErr) || (err == nil) != (tt.wantErr == nil) {
				t.Fatalf("Decide: %v, want %v", err, tt.wantErr)
			}
			checkInvariants(t, snap, &d, err, 1e-12)
			if tt.wantErr == nil && snap.Instances[d.Instance].ID != "dec" {
				t.Fatalf("decode instance %q, want dec", snap.Instances[d.Instance].ID)
			}
			pd := d.PD
			if pd.Reason != tt.reason || rng.calls != tt.calls || pd.UncachedTokens != tt.uncached || pd.PrefillEligible != tt.eligibleP {
				t.Fatalf("PD = %+v after %d draws, want reason %v, %d draws, %d uncached, %d eligible",
					pd, rng.calls, tt.reason, tt.calls, tt.uncached, tt.eligibleP)
			}
			near(t, "LocalMs", pd.LocalMs, tt.local, 1e-9)
			near(t, "RemoteMs", pd.RemoteMs, tt.remote, 1e-9)
			got := ""
			if pd.Prefill >= 0 {
				got = snap.Instances[pd.Prefill].ID
			}
			if got != tt.prefill {
				t.Fatalf("prefill %q, want %q", got, tt.prefill)
			}
			near(t, "PrefillProbability", pd.PrefillProbability, tt.prob, 1e-12)
		})
	}
}

// TestDecidePDPairsWithinDeployment: deployment A has decode instances
// only, B prefill and decode. A pick drawn into A never gets B's prefill
// instance, one drawn into B gets B's; a prefill-only deployment takes no
// traffic.
func TestDecidePDPairsWithinDeployment(t *testing.T) {
	snap := &scheduler.Snapshot{Deployments: deps(1, 1, 1), Instances: []scheduler.Instance{
		pdInst("a-dec", 0, scheduler.RoleDecode, 100, 0),
		pdInst("b-dec", 1, scheduler.RoleDecode, 100, 0),
		pdInst("b-pre", 1, scheduler.RolePrefill, 0, 0),
		pdInst("c-pre", 2, scheduler.RolePrefill, 0, 0),
	}}
	for _, tt := range []struct {
		draw          float64
		dec, pre      string
		reason        scheduler.PDReason
		prefillsInDep int
	}{
		{0.2, "a-dec", "", scheduler.PDNone, 0},
		{0.7, "b-dec", "b-pre", scheduler.PDDisaggregated, 1},
	} {
		var d scheduler.Decision
		err := scheduler.Decide(pdPolicy(nil), pdReq, snap, draws(tt.draw, 0, 0), &d)
		checkInvariants(t, snap, &d, err, 1e-12)
		if err != nil {
			t.Fatal(err)
		}
		pre := ""
		if d.PD.Prefill >= 0 {
			pre = snap.Instances[d.PD.Prefill].ID
		}
		if snap.Instances[d.Instance].ID != tt.dec || pre != tt.pre || d.PD.Reason != tt.reason || d.PD.PrefillInstances != tt.prefillsInDep {
			t.Fatalf("draw %v: %s + %q (%+v), want %s + %q", tt.draw, snap.Instances[d.Instance].ID, pre, d.PD, tt.dec, tt.pre)
		}
		if d.Deployments[2].Reason != scheduler.ReasonNoEligibleInstance || d.Deployments[0].Probability != 0.5 {
			t.Fatalf("deployments %+v", d.Deployments)
		}
		if d.Excluded[scheduler.ReasonPrefillRole] != 2 {
			t.Fatalf("Excluded %v", d.Excluded)
		}
	}
}

// TestDecidePDAggregatedUnchanged: a pool without prefill instances decides
// exactly as before roles existed (decode and both alike), with two draws
// and no prefill stage.
func TestDecidePDAggregatedUnchanged(t *testing.T) {
	mk := func(role scheduler.Role) *scheduler.Snapshot {
		var insts []scheduler.Instance
		for i, qm := range []float64{0, 20, 40, 10} {
			in := pdInst("i", i%2, role, qm, i*10)
			insts = append(insts, in)
		}
		return &scheduler.Snapshot{Deployments: deps(1, 9), Instances: insts}
	}
	var both, decode scheduler.Decision
	r1, r2 := rand.New(rand.NewPCG(1, 2)), rand.New(rand.NewPCG(1, 2))
	for range 1000 {
		e1 := scheduler.Decide(pdPolicy(nil), pdReq, mk(scheduler.RoleBoth), r1, &both)
		e2 := scheduler.Decide(pdPolicy(nil), pdReq, mk(scheduler.RoleDecode), r2, &decode)
		if e1 != nil || e2 != nil {
			t.Fatal(e1, e2)
		}
		if both.Instance != decode.Instance || both.InstanceDraw != decode.InstanceDraw || both.PD != decode.PD ||
			both.PD != (scheduler.PDResult{Prefill: -1}) {
			t.Fatalf("both %+v / decode %+v", both, decode)
		}
	}
	if r1.Float64() != r2.Float64() {
		t.Fatal("the RNGs diverged: a different number of draws")
	}
	cnt := draws(0.3, 0.3)
	if err := scheduler.Decide(pdPolicy(nil), pdReq, mk(scheduler.RoleBoth), cnt, &both); err != nil || cnt.calls != 2 {
		t.Fatalf("%v after %d draws, want 2", err, cnt.calls)
	}
}

// TestDecidePDSeeded: over 30,000 seeded picks, a disaggregated deployment
// of one decode and two prefill instances 20 ms apart sends 2/3 of the
// prefills to the cheaper one (softmax, delta 20 ms); exact counts for the
// seed.
func TestDecidePDSeeded(t *testing.T) {
	snap := &scheduler.Snapshot{Deployments: deps(1), Instances: []scheduler.Instance{
		pdInst("dec", 0, scheduler.RoleDecode, 100, 0),
		pdInst("p0", 0, scheduler.RolePrefill, 0, 0),
		pdInst("p1", 0, scheduler.RolePrefill, 20, 0),
	}}
	rng := rand.New(rand.NewPCG(30, 39))
	var d scheduler.Decision
	counts := map[string]int{}
	for range 30000 {
		if err := scheduler.Decide(pdPolicy(nil), pdReq, snap, rng, &d); err != nil {
			t.Fatal(err)
		}
		counts[snap.Instances[d.PD.Prefill].ID]++
	}
	if counts["p0"] != 20040 || counts["p1"] != 9960 {
		t.Fatalf("counts %v", counts)
	}
}

func TestRoleAndPDNames(t *testing.T) {
	for _, s := range []string{"both", "prefill", "decode", "", " Prefill "} {
		if _, ok := scheduler.ParseRole(s); !ok {
			t.Errorf("ParseRole(%q) failed", s)
		}
	}
	if _, ok := scheduler.ParseRole("encode"); ok {
		t.Error("ParseRole(encode) ok")
	}
	want := []string{"", "below_threshold", "no_prefill_instance", "prefill_saturated", "local_cheaper", "disaggregated"}
	for r := range scheduler.NumPDReasons {
		if r.String() != want[r] {
			t.Errorf("PDReason(%d) = %q, want %q", r, r.String(), want[r])
		}
	}
	if scheduler.RolePrefill.String() != "prefill" || scheduler.PDFallbackFail.String() != "fail" || scheduler.Role(9).String() != "Role(9)" {
		t.Error("names")
	}
}

// countRNG counts the draws of a seeded source.
type countRNG struct {
	r     *rand.Rand
	calls int
}

func (c *countRNG) Float64() float64 { c.calls++; return c.r.Float64() }

// TestDecidePDProperties: on 3,000 random pools with roles, every
// successful decision picks a decode or both instance; the prefill stage
// runs exactly when the drawn deployment has prefill instances; a chosen
// prefill instance is an eligible prefill instance of the drawn
// deployment whose P(p|d) is in (0, 1]; disaggregated decisions make
// three draws, the others two; the reasons agree with the figures; and
// the decode-level invariants hold.
func TestDecidePDProperties(t *testing.T) {
	outcomes := map[scheduler.PDReason]int{}
	for seed := range uint64(3000) {
		rng := rand.New(rand.NewPCG(seed, 30))
		blocks := rng.IntN(200)
		snap := randomPool(rng, 1+rng.IntN(24), 1+rng.IntN(4), blocks)
		for i := range snap.Instances {
			snap.Instances[i].Role = scheduler.Role(rng.IntN(3))
			if rng.IntN(3) == 0 {
				snap.Instances[i].Disconnected = true
			}
		}
		p := pdPolicy(func(p *scheduler.Policy) {
			p.PDMinUncachedTokens = uint32(rng.IntN(2048))
			p.PDTransferMsPerToken = rng.Float64() * 0.05
			p.PDFallback = scheduler.PDFallback(rng.IntN(2))
			p.Strategy = scheduler.Strategy(rng.IntN(3))
		})
		req := scheduler.Request{PromptTokens: uint32(blocks*16 + rng.IntN(4096)), Blocks: blocks}
		draw := &countRNG{r: rand.New(rand.NewPCG(seed, 1))}
		var d scheduler.Decision
		err := scheduler.Decide(p, req, snap, draw, &d)
		if !d.Saturated { // a saturated pick's P(i|d) = 1 has no eligible instance behind it
			checkInvariants(t, snap, &d, err, 1e-9)
		}
		pd := d.PD
		outcomes[pd.Reason]++
		switch {
		case errors.Is(err, scheduler.ErrNoPrefillInstance) || errors.Is(err, scheduler.ErrPrefillSaturated):
			if p.PDFallback != scheduler.PDFallbackFail || (pd.Reason != scheduler.PDNoPrefillInstance && pd.Reason != scheduler.PDPrefillSaturated) {
				t.Fatalf("seed %d: %v with fallback %v, PD %+v", seed, err, p.PDFallback, pd)
			}
			continue
		case err != nil:
			continue
		}
		dep := d.Deployment
		if snap.Instances[d.Instance].Role == scheduler.RolePrefill {
			t.Fatalf("seed %d: a prefill instance decodes", seed)
		}
		hasPrefill := false
		for _, in := range snap.Instances {
			hasPrefill = hasPrefill || (in.Deployment == dep && in.Role == scheduler.RolePrefill)
		}
		if (pd.Reason != scheduler.PDNone) != hasPrefill {
			t.Fatalf("seed %d: PD %+v, deployment has prefill instances: %v", seed, pd, hasPrefill)
		}
		wantCalls := 2
		if pd.Reason == scheduler.PDDisaggregated {
			wantCalls = 3
			pre := &snap.Instances[pd.Prefill]
			if pre.Deployment != dep || pre.Role != scheduler.RolePrefill || pre.Disconnected || pre.Draining ||
				!(pd.PrefillProbability > 0 && pd.PrefillProbability <= 1) || !(pd.LocalMs > pd.RemoteMs) ||
				pd.UncachedTokens < max(1, p.PDMinUncachedTokens) {
				t.Fatalf("seed %d: prefill %+v for PD %+v", seed, *pre, pd)
			}
		} else if pd.Prefill != -1 || pd.PrefillProbability != 0 {
			t.Fatalf("seed %d: PD %+v names a prefill instance", seed, pd)
		}
		if draw.calls != wantCalls {
			t.Fatalf("seed %d: %d draws for PD %v, want %d", seed, draw.calls, pd.Reason, wantCalls)
		}
	}
	for r := range scheduler.NumPDReasons {
		if outcomes[r] == 0 {
			t.Errorf("no decision had outcome %q: %v", r, outcomes)
		}
	}
}

// TestPDModeValidate: an unknown pd_mode is named in the error, as every
// enum field's is.
func TestPDModeValidate(t *testing.T) {
	p := pdPolicy(func(p *scheduler.Policy) { p.PDMode = scheduler.PDMode(2) })
	err := p.Validate()
	if !errors.Is(err, scheduler.ErrInvalidPolicy) || err.Error() != "invalid policy: pd_mode must be conditional or always, got PDMode(2)" {
		t.Fatalf("Validate = %v", err)
	}
	p.PDMode = scheduler.PDAlways
	if err := p.Validate(); err != nil {
		t.Fatalf("Validate(always) = %v", err)
	}
}
