package state

import (
	"errors"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/prefixroute/prefixroute/scheduler"
)

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
