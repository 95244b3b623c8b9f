package state

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/prefixroute/prefixroute/scheduler"
)

// cached returns the instance's LRU contents, most recent first.
func cached(p *Pool, id string) []uint64 {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return lruHashes(p.byID[id].cache)
}

func TestCacheEvents(t *testing.T) {
	_, p := newTestPool(t, Limits{})
	s := connect(t, p, t0, "d", "i", &Report{ReportsCacheEvents: true, KVCapacityBlocks: 4, Stored: []uint64{1, 2, 3}})
	steps := []struct {
		name   string
		rep    Report
		want   []uint64 // most recent first
		blocks int
	}{
		{"stored", Report{}, []uint64{3, 2, 1}, 3},
		{"removed", Report{Removed: []uint64{2, 99}}, []uint64{3, 1}, 2},
		{"stored again refreshes", Report{Stored: []uint64{1}}, []uint64{1, 3}, 2},
		{"capacity eviction drops the oldest from the index", Report{Stored: []uint64{4, 5, 6}}, []uint64{6, 5, 4, 1}, 4},
		{"removed applies before stored", Report{Removed: []uint64{6}, Stored: []uint64{6, 7}}, []uint64{7, 6, 5, 4}, 4},
		{"cache_cleared then stored", Report{CacheCleared: true, Stored: []uint64{8}}, []uint64{8}, 1},
		{"full again", Report{Stored: []uint64{9, 10, 11}}, []uint64{11, 10, 9, 8}, 4},
		{"capacity shrink evicts the oldest", Report{KVCapacityBlocks: 2}, []uint64{11, 10}, 2},
		{"capacity 0 falls back to the policy default", Report{KVCapacityBlocks: 0, Stored: []uint64{12, 13}}, []uint64{13, 12, 11, 10}, 4},
	}
	for _, st := range steps {
		rep := st.rep
		rep.ReportsCacheEvents = true
		if rep.KVCapacityBlocks == 0 && st.name != "capacity 0 falls back to the policy default" {
			rep.KVCapacityBlocks = 4
		}
		mustReport(t, s, t0, &rep)
		if got := cached(p, "i"); !slices.Equal(got, st.want) {
			t.Fatalf("%s: cached %v, want %v", st.name, got, st.want)
		}
		if blocks, pairs := p.IndexStats(); blocks != st.blocks || pairs != st.blocks {
			t.Fatalf("%s: index %d/%d, want %d", st.name, blocks, pairs, st.blocks)
		}
		mustInvariants(t, p)
	}
}

// TestCapacityFromPolicyAndLimit: without kv_capacity_blocks the policy's
// default bounds the LRU (following SetConfig), and MaxBlocksPerInstance caps
// whatever is reported.
func TestCapacityFromPolicyAndLimit(t *testing.T) {
	_, p := newTestPool(t, Limits{MaxBlocksPerInstance: 8})
	s := connect(t, p, t0, "d", "i", &Report{ReportsCacheEvents: true, KVCapacityBlocks: 1000})
	stored := make([]uint64, 20)
	for i := range stored {
		stored[i] = uint64(i + 1)
	}
	mustReport(t, s, t0, &Report{ReportsCacheEvents: true, KVCapacityBlocks: 1000, Stored: stored})
	if got := cached(p, "i"); len(got) != 8 || got[0] != 20 || got[7] != 13 {
		t.Fatalf("MaxBlocksPerInstance: cached %v", got)
	}
	cfg := DefaultConfig()
	cfg.Policy.DefaultKVCapacityBlocks = 5
	p.SetConfig(cfg)
	if got := cached(p, "i"); len(got) != 8 {
		t.Fatalf("policy default applied over a reported capacity: %v", got)
	}
	mustReport(t, s, t0, &Report{ReportsCacheEvents: true}) // no capacity reported
	if got := cached(p, "i"); !slices.Equal(got, []uint64{20, 19, 18, 17, 16}) {
		t.Fatalf("default capacity 5: cached %v", got)
	}
	cfg2 := DefaultConfig()
	cfg2.Policy.DefaultKVCapacityBlocks = 3
	p.SetConfig(cfg2)
	if got := cached(p, "i"); !slices.Equal(got, []uint64{20, 19, 18}) {
		t.Fatalf("SetConfig default 3: cached %v", got)
	}
	cfg3 := DefaultConfig()
	cfg3.Policy.DefaultKVCapacityBlocks = 0 // 0: the limit
	p.SetConfig(cfg3)
	mustReport(t, s, t0, &Report{ReportsCacheEvents: true, Stored: stored})
	if got := cached(p, "i"); len(got) != 8 {
		t.Fatalf("default 0 = MaxBlocksPerInstance: %d cached", len(got))
	}
	mustInvariants(t, p)
}

// pickOnce picks with a fixed seed and fails on error.
func pickOnce(t testing.TB, p *Pool, now time.Time, in *PickInput, seed uint64, pk *Pick) {
	t.Helper()
	if err := p.Pick(now, in, rand.New(rand.NewPCG(seed, seed)), pk); err != nil {
		t.Fatal(err)
	}
}

// TestModeSwitchClearsGuesses: an instance that starts reporting cache events
// loses the entries the router guessed for it; one that stops keeps nothing
// from the exact index either.
func TestModeSwitchClearsGuesses(t *testing.T) {
	_, p := newTestPool(t, Limits{})
	s := connect(t, p, t0, "d", "i", &Report{})
	var pk Pick
	pickOnce(t, p, t0, &PickInput{Hashes: []uint64{1, 2, 3}, PromptTokens: 48}, 1, &pk)
	if _, pairs := p.IndexStats(); pairs != 3 {
		t.Fatalf("guessed pairs %d, want 3", pairs)
	}
	// Same mode: guesses stay.
	mustReport(t, s, t0, &Report{})
	if _, pairs := p.IndexStats(); pairs != 3 {
		t.Fatalf("after approximate report: %d pairs", pairs)
	}
	// false -> true: cleared, then the report's own events apply.
	mustReport(t, s, t0, &Report{ReportsCacheEvents: true, Stored: []uint64{9}})
	if got := cached(p, "i"); !slices.Equal(got, []uint64{9}) {
		t.Fatalf("after switch to exact: %v", got)
	}
	// Exact: picks record nothing.
	pickOnce(t, p, t0, &PickInput{Hashes: []uint64{1, 2, 3}, PromptTokens: 48}, 2, &pk)
	if got := cached(p, "i"); !slices.Equal(got, []uint64{9}) {
		t.Fatalf("exact instance got guesses: %v", got)
	}
	// true -> false: the exact entries go too (they will not be maintained).
	mustReport(t, s, t0, &Report{})
	if _, pairs := p.IndexStats(); pairs != 0 {
		t.Fatalf("after switch to approximate: %d pairs", pairs)
	}
	mustInvariants(t, p)
}

// TestFirstReportExactClearsGuesses: an instance between Connect and its
// first report is stale, so no pick records guesses on it; and a first
// report with reports_cache_events starts from an empty exact index.
func TestFirstReportExactClearsGuesses(t *testing.T) {
	_, p := newTestPool(t, Limits{})
	s, err := p.Connect(t0, Identity{Pool: "p", Deployment: "d", Instance: "i", Address: "a"})
	if err != nil {
		t.Fatal(err)
	}
	var pk Pick
	err = p.Pick(t0, &PickInput{Hashes: []uint64{1, 2}, PromptTokens: 32}, rand.New(rand.NewPCG(1, 1)), &pk)
	if !errors.Is(err, scheduler.ErrNoEligibleInstance) || pk.Decision.Excluded[scheduler.ReasonStale] != 1 {
		t.Fatalf("pick before the first report: %v, excluded %v", err, pk.Decision.Excluded)
	}
	if p.Sweep(t0.Add(time.Hour)) != 0 {
		t.Fatal("Sweep forgot an instance between Connect and its first report")
	}
	mustReport(t, s, t0, &Report{ReportsCacheEvents: true, Stored: []uint64{5}})
	if got := cached(p, "i"); !slices.Equal(got, []uint64{5}) {
		t.Fatalf("exact instance after first report holds %v, want [5]", got)
	}
	mustInvariants(t, p)
}

// TestDeploymentsShares covers Deployments with and without weights.
func TestDeploymentsShares(t *testing.T) {
	_, p := newTestPool(t, Limits{})
	connect(t, p, t0, "b", "i1", nil)
	connect(t, p, t0, "a", "i2", nil)
	connect(t, p, t0, "a", "i3", nil)
	got := p.Deployments()
	want := []DeploymentWeight{
		{Deployment: "a", Weight: 1, Share: 0.5, Instances: 2},
		{Deployment: "b", Weight: 1, Share: 0.5, Instances: 1},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("unweighted: %+v", got)
	}
	cfg := DefaultConfig()
	cfg.Weights = map[string]float64{"a": 1, "c": 3}
	p.SetConfig(cfg)
	got = p.Deployments()
	want = []DeploymentWeight{
		{Deployment: "a", Weight: 1, Share: 0.25, Configured: true, Instances: 2},
		{Deployment: "b", Weight: 0, Share: 0, Instances: 1},
		{Deployment: "c", Weight: 3, Share: 0.75, Configured: true},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("weighted: %+v", got)
	}
	cfg = DefaultConfig()
	cfg.Weights = map[string]float64{"a": 0}
	p.SetConfig(cfg)
	for _, d := range p.Deployments() {
		if d.Share != 0 {
			t.Fatalf("all-zero weights: %+v", d)
		}
	}
	mustInvariants(t, p)
}
