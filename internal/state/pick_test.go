package state

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/prefixroute/prefixroute/scheduler"
)

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-12 }

// TestPickSpreadsBetweenReports: with four equal instances and 200 picks at
// the same instant (no report in between), optimistic accounting spreads the
// picks; the assigned work is exactly the uncached tokens picked, and a
// report resets it.
func TestPickSpreadsBetweenReports(t *testing.T) {
	_, p := newTestPool(t, Limits{})
	ids := []string{"a", "b", "c", "d"}
	sessions := map[string]*Session{}
	for _, id := range ids {
		sessions[id] = connect(t, p, t0, "dep", id, &Report{})
	}
	rng := rand.New(rand.NewPCG(2026, 1))
	var pk Pick
	counts := map[string]int{}
	assigned := map[string]uint64{}
	total := uint64(0)
	for i := range 200 {
		// Distinct cold prefixes, so only the load differs.
		in := &PickInput{Hashes: []uint64{uint64(i)<<8 | 1, uint64(i)<<8 | 2}, PromptTokens: 1000}
		if err := p.Pick(t0, in, rng, &pk); err != nil {
			t.Fatal(err)
		}
		id := pk.Snapshot.Instances[pk.Decision.Instance].ID
		// The snapshot shows the work assigned so far.
		for j, si := range pk.Snapshot.Instances {
			if si.AssignedTokens != assigned[si.ID] {
				t.Fatalf("pick %d: snapshot AssignedTokens[%s] = %d, want %d", i, si.ID, si.AssignedTokens, assigned[si.ID])
			}
			if si.MatchedBlocks != 0 {
				t.Fatalf("pick %d: instance %d matched %d of a cold prefix", i, j, si.MatchedBlocks)
			}
		}
		u := uint64(pk.Decision.Instances[pk.Decision.Instance].UncachedTokens)
		counts[id]++
		assigned[id] += u
		total += u
	}
	// Exact distribution for this seed; each instance's extra 1000 tokens
	// cost 100 ms = 5 deltas, so the picks stay almost round-robin.
	want := map[string]int{"a": 50, "b": 50, "c": 50, "d": 50}
	if !reflect.DeepEqual(counts, want) {
		t.Errorf("distribution %v, want %v", counts, want)
	}
	for _, id := range ids {
		if counts[id] < 20 {
			t.Errorf("instance %s got %d of 200 picks", id, counts[id])
		}
	}
	if total != 200*1000 {
		t.Fatalf("uncached total %d", total)
	}
	sum := uint64(0)
	for _, st := range p.Instances(t0) {
		if st.AssignedTokens != assigned[st.Instance] {
			t.Errorf("%s: AssignedTokens %d, want %d", st.Instance, st.AssignedTokens, assigned[st.Instance])
		}
		sum += st.AssignedTokens
	}
	if sum != total {
		t.Errorf("AssignedTokens sum %d, want %d", sum, total)
	}
	// A report accounts for the assigned work: reset to 0, others unchanged.
	mustReport(t, sessions["b"], t0.Add(time.Millisecond), &Report{QueuedPrefillTokens: 123})
	for _, st := range p.Instances(t0) {
		want := assigned[st.Instance]
		if st.Instance == "b" {
			want = 0
		}
		if st.AssignedTokens != want {
			t.Errorf("after b's report: %s AssignedTokens %d, want %d", st.Instance, st.AssignedTokens, want)
		}
	}
	mustInvariants(t, p)
}

// TestPickRecordsApproximate: for an instance without cache events, the
// request's blocks are recorded on the chosen instance, so the same request
// then matches all its blocks there, and a request sharing a prefix matches
// that prefix.
func TestPickRecordsApproximate(t *testing.T) {
	_, p := newTestPool(t, Limits{})
	for _, id := range []string{"a", "b", "c"} {
		connect(t, p, t0, "dep", id, &Report{})
	}
	hashes := []uint64{11, 12, 13, 14, 15, 16, 17, 18}
	var pk Pick
	pickOnce(t, p, t0, &PickInput{Hashes: hashes, PromptTokens: 128}, 5, &pk)
	chosen := pk.Snapshot.Instances[pk.Decision.Instance].ID
	if got := cached(p, chosen); !reflect.DeepEqual(got, hashes) {
		t.Fatalf("recorded %v on %s; want the request's blocks, first block most recent", got, chosen)
	}
	pickOnce(t, p, t0, &PickInput{Hashes: hashes, PromptTokens: 128}, 6, &pk)
	for _, si := range pk.Snapshot.Instances {
		want := 0
		if si.ID == chosen {
			want = len(hashes)
		}
		if si.MatchedBlocks != want {
			t.Errorf("second pick: %s matched %d, want %d", si.ID, si.MatchedBlocks, want)
		}
	}
	if i := snapIndex(t, &pk, chosen); pk.Decision.Instances[i].UncachedTokens != 0 {
		t.Errorf("fully cached request has %d uncached tokens", pk.Decision.Instances[i].UncachedTokens)
	}
	partial := []uint64{11, 12, 13, 14, 15, 99, 98}
	pickOnce(t, p, t0, &PickInput{Hashes: partial, PromptTokens: 112}, 7, &pk)
	if got := pk.Snapshot.Instances[snapIndex(t, &pk, chosen)].MatchedBlocks; got != 5 {
		t.Errorf("shared prefix: matched %d, want 5", got)
	}
	mustInvariants(t, p)
}

// TestPickRecordsWithinCapacity: a request longer than the instance's
// capacity keeps its first blocks (the tail is evicted first).
func TestPickRecordsWithinCapacity(t *testing.T) {
	_, p := newTestPool(t, Limits{})
	connect(t, p, t0, "dep", "a", &Report{KVCapacityBlocks: 3})
	var pk Pick
	pickOnce(t, p, t0, &PickInput{Hashes: []uint64{1, 2, 3, 4, 5}, PromptTokens: 80}, 1, &pk)
	if got := cached(p, "a"); !reflect.DeepEqual(got, []uint64{1, 2, 3}) {
		t.Fatalf("cached %v, want [1 2 3]", got)
	}
	pickOnce(t, p, t0, &PickInput{Hashes: []uint64{1, 2, 3, 4, 5}, PromptTokens: 80}, 1, &pk)
	if pk.Snapshot.Instances[0].MatchedBlocks != 3 {
		t.Fatalf("matched %d, want 3", pk.Snapshot.Instances[0].MatchedBlocks)
	}
	mustInvariants(t, p)
}

// TestPickExactNotGuessed: instances with reports_cache_events get no
// guessed entries; only their events fill the index.
func TestPickExactNotGuessed(t *testing.T) {
	_, p := newTestPool(t, Limits{})
	for _, id := range []string{"a", "b"} {
		connect(t, p, t0, "dep", id, &Report{ReportsCacheEvents: true})
	}
	hashes := []uint64{1, 2, 3, 4}
	var pk Pick
	for seed := range uint64(10) {
		pickOnce(t, p, t0, &PickInput{Hashes: hashes, PromptTokens: 64}, seed, &pk)
		for _, si := range pk.Snapshot.Instances {
			if si.MatchedBlocks != 0 {
				t.Fatalf("pick %d: %s matched %d", seed, si.ID, si.MatchedBlocks)
			}
		}
	}
	if blocks, pairs := p.IndexStats(); blocks != 0 || pairs != 0 {
		t.Fatalf("index %d/%d after picks on exact instances", blocks, pairs)
	}
	// The accounting of work still applies.
	total := uint64(0)
	for _, st := range p.Instances(t0) {
		total += st.AssignedTokens
	}
	if total != 10*64 {
		t.Fatalf("assigned %d, want 640", total)
	}
}

// TestPickExclude: excluded instances are never chosen and say why; unknown
// ids are ignored; excluding everyone is ErrNoEligibleInstance.
func TestPickExclude(t *testing.T) {
	_, p := newTestPool(t, Limits{})
	for _, id := range []string{"a", "b", "c"} {
		connect(t, p, t0, "dep", id, &Report{})
	}
	var pk Pick
	rng := rand.New(rand.NewPCG(9, 9))
	for i := range 60 {
		if err := p.Pick(t0, &PickInput{Exclude: []string{"a", "zzz"}}, rng, &pk); err != nil {
			t.Fatal(err)
		}
		a := snapIndex(t, &pk, "a")
		if pk.Decision.Instance == a {
			t.Fatalf("pick %d chose the excluded a", i)
		}
		if r := pk.Decision.Instances[a].Reason; r != scheduler.ReasonExcluded || pk.Decision.Excluded[scheduler.ReasonExcluded] != 1 {
			t.Fatalf("a's reason %v, count %d", r, pk.Decision.Excluded[scheduler.ReasonExcluded])
		}
		if !pk.Snapshot.Instances[a].Excluded || pk.Snapshot.Instances[snapIndex(t, &pk, "b")].Excluded {
			t.Fatal("snapshot Excluded flags wrong")
		}
	}
	err := p.Pick(t0, &PickInput{Exclude: []string{"a", "b", "c"}}, rng, &pk)
	if !errors.Is(err, scheduler.ErrNoEligibleInstance) || pk.Decision.Excluded[scheduler.ReasonExcluded] != 3 {
		t.Fatalf("all excluded: %v, %v", err, pk.Decision.Excluded)
	}
}

// TestPickOverrides: a gateway's load snapshot replaces the router's
// figures for one pick; probabilities follow p_i ∝ 2^(-S_i/delta).
func TestPickOverrides(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	u := func(v uint64) *uint64 { return &v }
	b := func(v bool) *bool { return &v }
	// softmax of two costs (ms) with delta 20.
	soft := func(sa, sb float64) float64 {
		wa, wb := math.Exp2(-sa/20), math.Exp2(-sb/20)
		return wa / (wa + wb)
	}
	tests := []struct {
		name      string
		base      Report // a's report; b reports zero load
		overrides []Override
		wantA     float64
		reasonA   scheduler.Reason
	}{
		{"no override", Report{}, nil, 0.5, 0},
		{"queue_ms 40 on a", Report{}, []Override{{Instance: "a", QueueMs: f(40)}}, 0.2, 0},
		{"queue_ms on both", Report{}, []Override{{Instance: "a", QueueMs: f(40)}, {Instance: "b", QueueMs: f(40)}}, 0.5, 0},
		{"queue_ms 7 on b", Report{}, []Override{{Instance: "b", QueueMs: f(7)}}, soft(0, 7), 0},
		{"queued tokens 400 at the default 10 tok/ms", Report{}, []Override{{Instance: "a", QueuedPrefillTokens: u(400)}}, 0.2, 0},
		{"queued tokens with a throughput override", Report{},
			[]Override{{Instance: "a", QueuedPrefillTokens: u(400), PrefillTokensPerSecond: f(20000)}}, 1.0 / 3, 0},
		{"queued tokens replace a reported queue_ms", Report{HasQueueMs: true, QueueMs: 100},
			[]Override{{Instance: "a", QueuedPrefillTokens: u(0)}}, 0.5, 0},
		{"reported queue_ms without override", Report{HasQueueMs: true, QueueMs: 100}, nil, soft(100, 0), 0},
		{"queue_ms wins over queued tokens", Report{QueuedPrefillTokens: 5000},
			[]Override{{Instance: "a", QueuedPrefillTokens: u(9999), QueueMs: f(20)}}, 1.0 / 3, 0},
		{"kv usage at max_kv_usage excludes", Report{}, []Override{{Instance: "a", KVCacheUsage: f(0.95)}}, 0, scheduler.ReasonKVFull},
		{"kv usage override readmits", Report{KVCacheUsage: 0.99}, []Override{{Instance: "a", KVCacheUsage: f(0.5)}}, 0.5, 0},
		{"draining override", Report{}, []Override{{Instance: "a", Draining: b(true)}}, 0, scheduler.ReasonDraining},
		{"not draining override", Report{Draining: true}, []Override{{Instance: "a", Draining: b(false)}}, 0.5, 0},
		{"unknown instance ignored", Report{}, []Override{{Instance: "nobody", QueueMs: f(1000)}}, 0.5, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, p := newTestPool(t, Limits{})
			base := tc.base
			connect(t, p, t0, "dep", "a", &base)
			connect(t, p, t0, "dep", "b", &Report{})
			var pk Pick
			// Prompt 0: no prefill, cost is the queue alone, and the pick
			// assigns no work.
			pickOnce(t, p, t0, &PickInput{Overrides: tc.overrides}, 1, &pk)
			a, bi := snapIndex(t, &pk, "a"), snapIndex(t, &pk, "b")
			got := pk.Decision.Instances[a]
			if !near(got.Probability, tc.wantA) || !near(pk.Decision.Instances[bi].Probability, 1-tc.wantA) {
				t.Errorf("P(a) = %.15g, P(b) = %.15g; want %.15g", got.Probability, pk.Decision.Instances[bi].Probability, tc.wantA)
			}
			if got.Reason != tc.reasonA {
				t.Errorf("a's reason %v, want %v", got.Reason, tc.reasonA)
			}
			// Overrides last one pick.
			pickOnce(t, p, t0, &PickInput{}, 1, &pk)
			var want float64
			switch {
			case base.Draining || base.KVCacheUsage >= 0.95:
				want = 0
			case base.HasQueueMs:
				want = soft(base.QueueMs, 0)
			default:
				want = soft(float64(base.QueuedPrefillTokens)/10, 0)
			}
			if got := pk.Decision.Instances[a].Probability; !near(got, want) {
				t.Errorf("next pick without overrides: P(a) = %.15g, want %.15g", got, want)
			}
		})
	}
}

// buildDeterministicPool builds the same pool every time: three
// deployments, loads, exact and approximate caches, weights.
func buildDeterministicPool(t *testing.T) *Pool {
	_, p := newTestPool(t, Limits{})
	cfg := DefaultConfig()
	cfg.Weights = map[string]float64{"old": 3, "new": 1, "empty": 2}
	cfg.WeightsVersion = 7
	p.SetConfig(cfg)
	for i := range 12 {
		dep := [...]string{"old", "new", "other"}[i%3]
		rep := &Report{QueuedPrefillTokens: uint64(100 * i), ReportsCacheEvents: i%2 == 0, KVCacheUsage: float64(i) / 20}
		if rep.ReportsCacheEvents {
			rep.Stored = []uint64{1, 2, 3, uint64(10 + i)}[:1+i%4]
		}
		connect(t, p, t0.Add(time.Duration(i)*time.Millisecond), dep, fmt.Sprintf("i%02d", i), rep)
	}
	var pk Pick
	rng := rand.New(rand.NewPCG(77, 77))
	for range 20 {
		if err := p.Pick(t0.Add(time.Second), &PickInput{Hashes: []uint64{1, 2, 3, 4}, PromptTokens: 200}, rng, &pk); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

// TestPickDeterministic: the same state and the same seed give the same
// choice and an identical Decision and Snapshot, with a fresh or a reused
// Pick.
func TestPickDeterministic(t *testing.T) {
	in := &PickInput{Hashes: []uint64{1, 2, 3, 9}, PromptTokens: 300, Exclude: []string{"i04"}}
	now := t0.Add(1500 * time.Millisecond)
	var first Pick
	pickOnce(t, buildDeterministicPool(t), now, in, 4242, &first)
	reused := Pick{}
	pickOnce(t, buildDeterministicPool(t), now, &PickInput{Hashes: make([]uint64, 500), PromptTokens: 9000}, 1, &reused)
	for trial := range 3 {
		var fresh Pick
		out := &fresh
		if trial == 2 {
			out = &reused
		}
		pickOnce(t, buildDeterministicPool(t), now, in, 4242, out)
		if out.Decision.Instance != first.Decision.Instance || out.Decision.Deployment != first.Decision.Deployment {
			t.Fatalf("trial %d: chose %d/%d, first %d/%d", trial, out.Decision.Deployment, out.Decision.Instance,
				first.Decision.Deployment, first.Decision.Instance)
		}
		if !reflect.DeepEqual(out.Decision, first.Decision) {
			t.Fatalf("trial %d: decisions differ:\n%+v\n%+v", trial, out.Decision, first.Decision)
		}
		if !reflect.DeepEqual(out.Snapshot, first.Snapshot) || !reflect.DeepEqual(out.Addresses, first.Addresses) {
			t.Fatalf("trial %d: snapshots differ", trial)
		}
	}
	if first.Config.WeightsVersion != 7 {
		t.Fatalf("config version %d", first.Config.WeightsVersion)
	}
	// A different seed draws differently.
	var other Pick
	pickOnce(t, buildDeterministicPool(t), now, in, 4243, &other)
	if other.Decision.DeploymentDraw == first.Decision.DeploymentDraw {
		t.Fatal("different seeds drew the same")
	}
}

// TestPickWeights: deployment-level probabilities from the state's weights.
func TestPickWeights(t *testing.T) {
	setup := func(t *testing.T, weights map[string]float64) *Pool {
		_, p := newTestPool(t, Limits{})
		if weights != nil {
			cfg := DefaultConfig()
			cfg.Weights = weights
			p.SetConfig(cfg)
		}
		for i, dep := range []string{"a", "b", "b", "c", "c", "c"} {
			connect(t, p, t0, dep, fmt.Sprint("i", i), &Report{})
		}
		return p
	}
	depProb := func(pk *Pick) map[string]float64 {
		m := map[string]float64{}
		for k, d := range pk.Snapshot.Deployments {
			m[d.Name] = pk.Decision.Deployments[k].Probability
		}
		return m
	}
	t.Run("unset weights split equally over deployments", func(t *testing.T) {
		p := setup(t, nil)
		var pk Pick
		rng := rand.New(rand.NewPCG(5, 5))
		counts := map[string]int{}
		for range 3000 {
			// Prompt 0: no assigned work, no recorded blocks; state unchanged.
			if err := p.Pick(t0, &PickInput{}, rng, &pk); err != nil {
				t.Fatal(err)
			}
			counts[pk.Snapshot.Deployments[pk.Decision.Deployment].Name]++
		}
		for name, pr := range depProb(&pk) {
			if !near(pr, 1.0/3) {
				t.Errorf("P(%s) = %v, want 1/3", name, pr)
			}
		}
		for k, d := range pk.Snapshot.Deployments {
			if d.Weight != 1 || d.Unweighted || pk.Decision.Deployments[k].Reason != scheduler.ReasonNone {
				t.Errorf("deployment %+v, reason %v", d, pk.Decision.Deployments[k].Reason)
			}
		}
		// Within c, each of the three instances gets 1/3 of 1/3.
		for i, r := range pk.Decision.Instances {
			if pk.Snapshot.Instances[i].Deployment == 2 && !near(r.Joint, 1.0/9) {
				t.Errorf("instance %d joint %v, want 1/9", i, r.Joint)
			}
		}
		if want := map[string]int{"a": 1030, "b": 962, "c": 1008}; !reflect.DeepEqual(counts, want) {
			t.Errorf("counts %v, want %v (seeded)", counts, want)
		}
	})
	t.Run("a deployment missing from the weights is unweighted", func(t *testing.T) {
		p := setup(t, map[string]float64{"a": 1, "b": 3, "z": 2})
		var pk Pick
		pickOnce(t, p, t0, &PickInput{}, 1, &pk)
		got := depProb(&pk)
		if !near(got["a"], 0.25) || !near(got["b"], 0.75) || got["c"] != 0 || got["z"] != 0 {
			t.Errorf("probabilities %v", got)
		}
		for k, d := range pk.Snapshot.Deployments {
			want := map[string]scheduler.Reason{"c": scheduler.ReasonUnweighted, "z": scheduler.ReasonNoEligibleInstance}[d.Name]
			if r := pk.Decision.Deployments[k].Reason; r != want {
				t.Errorf("%s: reason %v, want %v", d.Name, r, want)
			}
			if d.Name == "c" && (!d.Unweighted || d.Weight != 0) {
				t.Errorf("c in snapshot: %+v", d)
			}
		}
	})
	t.Run("weight 0 drains a deployment", func(t *testing.T) {
		p := setup(t, map[string]float64{"a": 0, "b": 1, "c": 1})
		var pk Pick
		pickOnce(t, p, t0, &PickInput{}, 1, &pk)
		if got := depProb(&pk); got["a"] != 0 || !near(got["b"], 0.5) {
			t.Errorf("probabilities %v", got)
		}
		if r := pk.Decision.Deployments[0].Reason; r != scheduler.ReasonZeroWeight {
			t.Errorf("a: reason %v", r)
		}
	})
	t.Run("all weights 0", func(t *testing.T) {
		p := setup(t, map[string]float64{"a": 0, "b": 0, "c": 0})
		var pk Pick
		err := p.Pick(t0, &PickInput{Hashes: []uint64{1}, PromptTokens: 100}, rand.New(rand.NewPCG(1, 1)), &pk)
		if !errors.Is(err, scheduler.ErrAllWeightsZero) || pk.Decision.Instance != -1 {
			t.Fatalf("err %v, instance %d", err, pk.Decision.Instance)
		}
		// A failed pick assigns nothing and records nothing.
		for _, st := range p.Instances(t0) {
			if st.AssignedTokens != 0 || st.CachedBlocks != 0 {
				t.Fatalf("failed pick touched %s: %+v", st.Instance, st)
			}
		}
	})
	t.Run("only unweighted deployments", func(t *testing.T) {
		p := setup(t, map[string]float64{"z": 1})
		var pk Pick
		err := p.Pick(t0, &PickInput{}, rand.New(rand.NewPCG(1, 1)), &pk)
		if !errors.Is(err, scheduler.ErrAllWeightsZero) {
			t.Fatalf("err %v", err)
		}
	})
}

// TestPickSeedCutover is the seed's worked number end to end: weights 1:9, A
// holds the prefix (sparse and dense holder sets), B is cold, lambda_h 10:
// P_B = 9 / (2^10 + 9).
func TestPickSeedCutover(t *testing.T) {
	for _, perDep := range []int{1, 100} {
		t.Run(fmt.Sprint(perDep, " instances per deployment"), func(t *testing.T) {
			_, p := newTestPool(t, Limits{})
			cfg := DefaultConfig()
			cfg.Weights = map[string]float64{"A": 1, "B": 9}
			p.SetConfig(cfg)
			hashes := []uint64{7, 8, 9, 10}
			for i := range perDep {
				connect(t, p, t0, "A", fmt.Sprint("a", i), &Report{ReportsCacheEvents: true, Stored: hashes})
				connect(t, p, t0, "B", fmt.Sprint("b", i), &Report{ReportsCacheEvents: true})
			}
			var pk Pick
			pickOnce(t, p, t0, &PickInput{Hashes: hashes, PromptTokens: 64}, 3, &pk)
			d := pk.Decision.Deployments
			if d[0].HitRatio != 1 || d[1].HitRatio != 0 {
				t.Fatalf("hit ratios %v %v", d[0].HitRatio, d[1].HitRatio)
			}
			if want := 9.0 / (1024 + 9); !near(d[1].Probability, want) {
				t.Fatalf("P_B = %.15g, want %.15g", d[1].Probability, want)
			}
		})
	}
}

// TestPickErrors: an empty pool and a pool of stale instances.
func TestPickErrors(t *testing.T) {
	_, p := newTestPool(t, Limits{})
	var pk Pick
	rng := rand.New(rand.NewPCG(1, 1))
	if err := p.Pick(t0, &PickInput{}, rng, &pk); !errors.Is(err, scheduler.ErrNoInstances) {
		t.Fatalf("empty pool: %v", err)
	}
	connect(t, p, t0, "d", "a", nil)
	if err := p.Pick(t0.Add(3*time.Second), &PickInput{}, rng, &pk); !errors.Is(err, scheduler.ErrNoEligibleInstance) ||
		pk.Decision.Excluded[scheduler.ReasonStale] != 1 {
		t.Fatalf("stale pool: %v %v", err, pk.Decision.Excluded)
	}
	if pk.Snapshot.Instances[0].ReportAge != 3*time.Second {
		t.Fatalf("report age %v", pk.Snapshot.Instances[0].ReportAge)
	}
}

// TestPickReuseAcrossPools: one Pick serves pools of different sizes.
func TestPickReuseAcrossPools(t *testing.T) {
	_, big := newTestPool(t, Limits{})
	for i := range 300 {
		connect(t, big, t0, "d", fmt.Sprint("i", i), &Report{ReportsCacheEvents: true, Stored: []uint64{1}})
	}
	_, small := newTestPool(t, Limits{})
	connect(t, small, t0, "d", "x", &Report{ReportsCacheEvents: true, Stored: []uint64{2}})
	connect(t, small, t0, "d", "y", &Report{ReportsCacheEvents: true, Stored: []uint64{1}})
	var pk Pick
	pickOnce(t, big, t0, &PickInput{Hashes: []uint64{1}, PromptTokens: 16}, 1, &pk)
	if len(pk.Snapshot.Instances) != 300 || pk.Snapshot.Instances[299].MatchedBlocks != 1 {
		t.Fatal("big pool snapshot wrong")
	}
	pickOnce(t, small, t0, &PickInput{Hashes: []uint64{1}, PromptTokens: 16}, 1, &pk)
	if len(pk.Snapshot.Instances) != 2 || len(pk.Addresses) != 2 || len(pk.Snapshot.Deployments) != 1 ||
		pk.Snapshot.Instances[0].MatchedBlocks != 0 || pk.Snapshot.Instances[1].MatchedBlocks != 1 {
		t.Fatalf("small pool snapshot after big: %+v", pk.Snapshot)
	}
}

// TestPickDoesNotAllocate: with a reused Pick, a pick on a warm pool
// allocates nothing, with the full audit or the chosen deployment's.
func TestPickDoesNotAllocate(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("allocation counts are not meaningful under -race")
	}
	_, p := newTestPool(t, Limits{})
	for i := range 100 {
		connect(t, p, t0, fmt.Sprint("d", i%4), fmt.Sprint("i", i), &Report{ReportsCacheEvents: i%2 == 0, Stored: []uint64{1, 2}})
	}
	for _, chosenOnly := range []bool{false, true} {
		in := &PickInput{Hashes: []uint64{1, 2, 3}, PromptTokens: 48, ChosenOnly: chosenOnly}
		var pk Pick
		rng := rand.New(rand.NewPCG(1, 2))
		pickOnce(t, p, t0, in, 1, &pk)
		allocs := testing.AllocsPerRun(200, func() {
			if err := p.Pick(t0, in, rng, &pk); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 0 {
			t.Errorf("Pick (ChosenOnly %v) allocates %v times per call", chosenOnly, allocs)
		}
	}
}

// TestPickReportAge: the snapshot's ReportAge is max(0, now.Sub(last report))
// exactly, whatever the clocks: monotonic readings (as in the daemon) or
// none (virtual time), both mixed, reports far from the first one, and an
// instance that has not reported yet.
func TestPickReportAge(t *testing.T) {
	wall := t0
	mono := time.Now()
	tests := []struct {
		name    string
		reports []time.Time // one instance each; the first sets the epoch
		nows    []time.Time
	}{
		{"wall clock", []time.Time{wall, wall.Add(-time.Second), wall.Add(time.Hour)},
			[]time.Time{wall, wall.Add(1500 * time.Millisecond), wall.Add(-time.Minute), wall.Add(2 * time.Hour)}},
		{"monotonic clock", []time.Time{mono, mono.Add(-time.Second), mono.Add(time.Millisecond)},
			[]time.Time{mono, mono.Add(time.Second), mono.Add(-time.Hour)}},
		{"mixed", []time.Time{mono, mono.Round(0).Add(time.Second), wall},
			[]time.Time{mono.Add(time.Second), mono.Round(0).Add(3 * time.Second), wall.Add(time.Second)}},
		{"centuries apart", []time.Time{wall, wall.AddDate(-200, 0, 0), wall.AddDate(250, 0, 0), {}},
			[]time.Time{wall, wall.AddDate(200, 0, 0), wall.AddDate(-200, 0, 0), {}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, p := newTestPool(t, Limits{})
			last := map[string]time.Time{}
			for i, at := range tc.reports {
				id := fmt.Sprint("i", i)
				connect(t, p, at, "d", id, &Report{ReportsCacheEvents: true})
				last[id] = at
			}
			// One more instance connected but never reported.
			if _, err := p.Connect(wall, Identity{Pool: "p", Deployment: "d", Instance: "silent", Address: "s"}); err != nil {
				t.Fatal(err)
			}
			mustInvariants(t, p)
			var pk Pick
			for _, now := range tc.nows {
				p.snapshot(now, &PickInput{}, &pk)
				for _, si := range pk.Snapshot.Instances {
					want := max(0, now.Sub(last[si.ID])) // zero time for "silent"
					if si.ReportAge != want {
						t.Errorf("now %v: %s age %v, want %v", now, si.ID, si.ReportAge, want)
					}
				}
			}
		})
	}
}
