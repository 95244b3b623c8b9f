package state

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/prefixroute/prefixroute/scheduler"
)

// randomChosenPool builds a pool of random instances for
// TestPickChosenMatchesFull: up to 6 deployments (weights unset, configured,
// 0 or missing), every eligibility reason (never reported, disconnected,
// stale, draining, kv_full, queue_full), exact and approximate instances
// holding prefixes of a few chains. It returns the pool and the chains.
func randomChosenPool(t *testing.T, rng *rand.Rand, seed uint64) (*Pool, [][]uint64, []*Session) {
	t.Helper()
	_, p := newTestPool(t, Limits{})
	nd, n := 1+rng.IntN(6), 1+rng.IntN(80)
	cfg := DefaultConfig()
	cfg.Policy.Strategy = []scheduler.Strategy{scheduler.Softmax, scheduler.Threshold, scheduler.Argmin}[seed%3]
	if seed%4 == 1 {
		cfg.Policy.OnSLOMiss = scheduler.SLOShed
	}
	if seed%2 == 1 {
		cfg.Policy.DeploymentDeltaMs = 5 + float64(seed%5)*30
	}
	if seed%4 == 0 {
		cfg.Policy.MaxQueueMs = 200
	}
	roles := seed%5 >= 2 // prefill/decode roles (issue 30): prefill instances never the pick's, the prefill stage
	if roles {
		cfg.Policy.PDMinUncachedTokens = 64
		cfg.Policy.PDTransferMsPerToken = 0.001
	}
	if seed%3 == 1 {
		cfg.Weights = map[string]float64{}
		for k := range nd {
			if r := rng.IntN(6); r > 0 { // r == 0: missing from the weights
				cfg.Weights[fmt.Sprintf("d%d", k)] = float64(r - 1)
			}
		}
	}
	p.SetConfig(cfg)
	chains := make([][]uint64, 4)
	for c := range chains {
		for range 32 {
			chains[c] = append(chains[c], rng.Uint64())
		}
	}
	var sessions []*Session
	for i := range n {
		dep, id := fmt.Sprintf("d%d", rng.IntN(nd)), fmt.Sprintf("i%03d", i)
		s, err := p.Connect(t0, Identity{Pool: p.Name(), Deployment: dep, Instance: id, Address: id + ":8000"})
		if err != nil {
			t.Fatal(err)
		}
		quiet := seed%2 == 0 // no instance stale or unreported: the kept counts decide
		if !quiet && rng.IntN(15) == 0 {
			continue // never reported
		}
		rep := Report{ReportsCacheEvents: rng.IntN(4) > 0, HasQueueMs: rng.IntN(2) == 0, QueueMs: 300 * rng.Float64(),
			QueuedPrefillTokens: uint64(rng.IntN(4000)), KVCacheUsage: rng.Float64(), Draining: rng.IntN(12) == 0,
			PrefillTokensPerSecond: float64(rng.IntN(3)) * 8000, BlockSizeTokens: uint32(rng.IntN(2)) * 16}
		if rep.ReportsCacheEvents {
			rep.Stored = chains[rng.IntN(len(chains))][:rng.IntN(33)]
		}
		if roles {
			rep.Role = []scheduler.Role{scheduler.RoleBoth, scheduler.RolePrefill, scheduler.RolePrefill, scheduler.RoleDecode}[rng.IntN(4)]
		}
		age := time.Duration(rng.IntN(3000)) * time.Millisecond // stale_after is 2 s
		if quiet {
			age = time.Duration(rng.IntN(1500)) * time.Millisecond
		}
		if err := s.Report(t0.Add(-age), &rep); err != nil {
			t.Fatal(err)
		}
		sessions = append(sessions, s)
		if rng.IntN(20) == 0 {
			s.Close(t0)
		}
	}
	return p, chains, sessions
}

// TestPickChosenMatchesFull compares ChosenOnly picks (Pool.pickChosen, or
// its fallback) on 80 random pools, 25 picks each with time moving on and
// the picks' assigned work accumulating, with scheduler.Decide on the full
// snapshot taken just before: the error, the choice, both draws, every
// deployment result, Excluded outside the strategy reasons, and the complete
// result of every instance of the chosen deployment, which must be exactly
// the pick's snapshot.
func TestPickChosenMatchesFull(t *testing.T) {
	fast := 0
	for seed := range uint64(80) {
		rng := rand.New(rand.NewPCG(seed, 31))
		p, chains, sessions := randomChosenPool(t, rng, seed)
		now := t0
		for k := range uint64(25) {
			step := 200
			if seed%2 == 0 {
				step = 20 // randomChosenPool's quiet pools stay fresh for 25 picks
			}
			now = now.Add(time.Duration(rng.IntN(step)) * time.Millisecond)
			if k == 8 && len(sessions) > 0 {
				// A report dated back to near stale_after, which later picks
				// see go stale: the kept bound on report times must follow.
				s := sessions[rng.IntN(len(sessions))]
				if err := s.Report(now.Add(-1900*time.Millisecond), &Report{Seq: 99, ReportsCacheEvents: true}); err != nil && !errors.Is(err, ErrSessionEnded) {
					t.Fatal(err)
				}
			}
			in := PickInput{Hashes: chains[rng.IntN(len(chains))][:rng.IntN(33)], ChosenOnly: true}
			in.PromptTokens = uint32(len(in.Hashes)*16 + rng.IntN(64))
			for range rng.IntN(3) {
				in.Exclude = append(in.Exclude, fmt.Sprintf("i%03d", rng.IntN(90)))
			}
			// A TTFT target on some picks: 0 (none), 20, 40, 60 or 80 ms.
			in.TTFTTargetMs = float64((seed*7+k*13)%5) * 20
			name := fmt.Sprintf("seed %d pick %d", seed, k)
			var ref, got Pick
			p.snapshot(now, &in, &ref)
			req := scheduler.Request{PromptTokens: in.PromptTokens, Blocks: len(in.Hashes), PrefillWeight: ref.prefillWeight, TTFTTargetMs: in.TTFTTargetMs}
			errRef := scheduler.Decide(&ref.Config.Policy, req, &ref.Snapshot, rand.New(rand.NewPCG(seed, k)), &ref.Decision)
			err := p.Pick(now, &in, rand.New(rand.NewPCG(seed, k)), &got)
			if !errors.Is(err, errRef) && err != errRef {
				t.Fatalf("%s: error %v, full %v", name, err, errRef)
			}
			if compareChosenPick(t, name, &ref, &got) {
				fast++
			}
		}
		mustInvariants(t, p)
	}
	if fast < 800 {
		t.Fatalf("only %d of 2000 picks took the summary path; the test covers too little", fast)
	}
	if disaggregated < 100 {
		t.Fatalf("only %d of 2000 picks were disaggregated; the test covers too little", disaggregated)
	}
}

// compareChosenPick fails t when got (a ChosenOnly pick) disagrees with
// ref (the full decision); it reports whether got holds the chosen
// deployment's instances only.
func compareChosenPick(t *testing.T, name string, ref, got *Pick) bool {
	t.Helper()
	f, g := &ref.Decision, &got.Decision
	if f.Deployment != g.Deployment || f.DeploymentDraw != g.DeploymentDraw || f.InstanceDraw != g.InstanceDraw ||
		f.Saturated != g.Saturated || f.DrainMs != g.DrainMs {
		t.Fatalf("%s: picked (%d, draws %v %v, saturated %v, drain %v), full (%d, draws %v %v, saturated %v, drain %v)", name,
			g.Deployment, g.DeploymentDraw, g.InstanceDraw, g.Saturated, g.DrainMs,
			f.Deployment, f.DeploymentDraw, f.InstanceDraw, f.Saturated, f.DrainMs)
	}
	fp, gp := f.PD, g.PD
	fp.Prefill, gp.Prefill = 0, 0
	if fp != gp || (f.PD.Prefill < 0) != (g.PD.Prefill < 0) ||
		(f.PD.Prefill >= 0 && ref.Snapshot.Instances[f.PD.Prefill].ID != got.Snapshot.Instances[g.PD.Prefill].ID) {
		t.Fatalf("%s: prefill stage %+v, full %+v", name, g.PD, f.PD)
	}
	if f.PD.Reason == scheduler.PDDisaggregated {
		disaggregated++
	}
	for k := range f.Deployments {
		if f.Deployments[k] != g.Deployments[k] {
			t.Fatalf("%s: deployment %d: %+v, full %+v", name, k, g.Deployments[k], f.Deployments[k])
		}
	}
	// The instances ref holds that got must hold, in order.
	var idx []int
	for i := range ref.Snapshot.Instances {
		if f.Instance < 0 || f.Saturated || ref.Snapshot.Instances[i].Deployment == f.Deployment {
			idx = append(idx, i)
		}
	}
	compact := len(got.Snapshot.Instances) == len(idx) && len(idx) < len(ref.Snapshot.Instances)
	if !compact {
		idx = idx[:0]
		for i := range ref.Snapshot.Instances {
			idx = append(idx, i)
		}
	}
	if len(got.Snapshot.Instances) != len(idx) || len(g.Instances) != len(idx) || len(got.Addresses) != len(idx) {
		t.Fatalf("%s: %d instances in the pick, want %d", name, len(got.Snapshot.Instances), len(idx))
	}
	var strategy [scheduler.NumReasons]int
	for j, i := range idx {
		if ref.Snapshot.Instances[i] != got.Snapshot.Instances[j] || ref.Addresses[i] != got.Addresses[j] {
			t.Fatalf("%s: snapshot instance %d: %+v, full %+v", name, j, got.Snapshot.Instances[j], ref.Snapshot.Instances[i])
		}
		fr, gr := f.Instances[i], g.Instances[j]
		if !compact && f.Instance >= 0 && ref.Snapshot.Instances[i].Deployment != f.Deployment && !f.Saturated {
			// A full snapshot decided ChosenOnly: other deployments have
			// no P(i|d) nor strategy reasons.
			if fr.Reason == scheduler.ReasonThreshold || fr.Reason == scheduler.ReasonNotMinimum || fr.Reason == scheduler.ReasonSLOMiss {
				fr.Reason = scheduler.ReasonNone
			}
			fr.Probability, fr.Joint = 0, 0
		} else {
			strategy[fr.Reason]++
		}
		if fr != gr {
			t.Fatalf("%s: instance %s: %+v, full %+v", name, ref.Snapshot.Instances[i].ID, gr, fr)
		}
		if i == f.Instance && j != g.Instance {
			t.Fatalf("%s: picked index %d, full %d (index %d here)", name, g.Instance, f.Instance, j)
		}
	}
	for r := range f.Excluded {
		want := f.Excluded[r]
		if reason := scheduler.Reason(r); f.Instance >= 0 && (reason == scheduler.ReasonThreshold || reason == scheduler.ReasonNotMinimum || reason == scheduler.ReasonSLOMiss) {
			want = strategy[r]
		}
		if g.Excluded[r] != want {
			t.Fatalf("%s: Excluded[%v] = %d, want %d", name, scheduler.Reason(r), g.Excluded[r], want)
		}
	}
	return compact
}

// disaggregated counts the disaggregated picks compareChosenPick saw.
var disaggregated int

// TestSummariseKept: with every connected instance fresh the kept counts
// decide (no pass over the instances); once one is stale, a request's
// exclusion aside, or with the load term on, they do not.
func TestSummariseKept(t *testing.T) {
	_, p := newTestPool(t, Limits{})
	rep := &Report{ReportsCacheEvents: true, Stored: []uint64{1, 2}}
	connect(t, p, t0, "a", "a1", rep)
	connect(t, p, t0.Add(time.Second), "a", "a2", rep)
	connect(t, p, t0, "b", "b1", &Report{Draining: true})
	kept := func(now time.Time, in *PickInput, delta float64) (bool, *Pick) {
		t.Helper()
		var out Pick
		pol := p.Config().Policy
		pol.DeploymentDeltaMs = delta
		p.mu.RLock()
		defer p.mu.RUnlock()
		words := p.index.words
		out.active, out.nextBS, out.matched = make([]uint64, words), make([]uint64, words), make([]int32, words*64)
		p.index.matchLogged(in.Hashes, p.live, out.matched, out.active, out.nextBS, &out.drops)
		out.sums = make([]scheduler.Summary, len(p.deps))
		if len(in.Exclude) > 0 {
			out.excl = make([]uint64, 1)
			for _, id := range in.Exclude {
				out.excl[0] |= 1 << p.byID[id].ord
			}
		}
		var ex [scheduler.NumReasons]int
		ok := p.summariseKept(now, &pol, len(in.Exclude) > 0, &out, &ex)
		return ok, &out
	}
	in := &PickInput{Hashes: []uint64{1, 2, 3}}
	ok, out := kept(t0.Add(1500*time.Millisecond), in, 0)
	if want := []scheduler.Summary{{Eligible: 2, MatchedBlocks: 2}, {}}; !ok || !slices.Equal(out.sums, want) {
		t.Fatalf("fresh pool: kept %v, summaries %+v; want true, %+v", ok, out.sums, want)
	}
	in.Exclude = []string{"a2"}
	if ok, out := kept(t0.Add(1500*time.Millisecond), in, 0); !ok || out.sums[0] != (scheduler.Summary{Eligible: 1, MatchedBlocks: 2}) {
		t.Fatalf("a2 excluded: kept %v, summary %+v", ok, out.sums[0])
	}
	if ok, _ := kept(t0.Add(1500*time.Millisecond), in, 50); ok {
		t.Fatal("load term on: the kept counts decided")
	}
	if ok, _ := kept(t0.Add(2500*time.Millisecond), in, 0); ok {
		t.Fatal("a1 and b1 stale: the kept counts decided")
	}
}
