package state

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prefixroute/prefixroute/scheduler"
)

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// TestInstanceLifecycle walks one instance through Connect, Report, staleness,
// draining, Close and Sweep, checking its ListInstances state at each step.
func TestInstanceLifecycle(t *testing.T) {
	_, p := newTestPool(t, Limits{})
	stale := p.Config().Policy.StaleAfter   // 2s
	forget := p.Config().Policy.ForgetAfter // 30s

	s := connect(t, p, t0, "d1", "i1", &Report{Seq: 1, QueuedPrefillTokens: 5})
	steps := []struct {
		name string
		do   func()
		now  time.Time
		want InstanceState
		age  time.Duration
	}{
		{"fresh report", nil, t0, StateOK, 0},
		{"age == stale_after is still ok", nil, t0.Add(stale), StateOK, stale},
		{"age > stale_after is stale", nil, t0.Add(stale + 1), StateStale, stale + 1},
		{"a clock behind the report gives age 0", nil, t0.Add(-time.Second), StateOK, 0},
		{"new report is ok again", func() { mustReport(t, s, t0.Add(10*time.Second), &Report{Seq: 2}) }, t0.Add(10 * time.Second), StateOK, 0},
		{"draining", func() { mustReport(t, s, t0.Add(11*time.Second), &Report{Seq: 3, Draining: true}) }, t0.Add(11 * time.Second), StateDraining, 0},
		{"stale beats draining", nil, t0.Add(11*time.Second + stale + 1), StateStale, stale + 1},
		{"closed is disconnected", func() { s.Close(t0.Add(12 * time.Second)) }, t0.Add(12 * time.Second), StateDisconnected, time.Second},
		{"disconnected beats stale", nil, t0.Add(40 * time.Second), StateDisconnected, 29 * time.Second},
	}
	for _, st := range steps {
		if st.do != nil {
			st.do()
		}
		got := statusOf(t, p, st.now, "i1")
		if got.State != st.want || got.ReportAge != st.age {
			t.Errorf("%s: state %v age %v, want %v %v", st.name, got.State, got.ReportAge, st.want, st.age)
		}
		if got.State.String() != [...]string{"", "ok", "stale", "draining", "disconnected"}[st.want] {
			t.Errorf("%s: String() = %q", st.name, got.State)
		}
	}
	if err := s.Report(t0.Add(13*time.Second), &Report{}); !errors.Is(err, ErrSessionEnded) {
		t.Errorf("Report after Close: %v, want ErrSessionEnded", err)
	}
	if InstanceState(0).String() != "unknown" {
		t.Error("zero state not unknown")
	}

	// Sweep keeps it up to exactly forget_after after the close, then drops
	// it with its deployment.
	closedAt := t0.Add(12 * time.Second)
	if n := p.Sweep(closedAt.Add(forget)); n != 0 {
		t.Fatalf("Sweep at forget_after forgot %d", n)
	}
	if n := p.Sweep(closedAt.Add(forget + 1)); n != 1 {
		t.Fatalf("Sweep after forget_after forgot %d, want 1", n)
	}
	if deps, ins := p.Counts(); deps != 0 || ins != 0 {
		t.Fatalf("after forget: %d deployments, %d instances", deps, ins)
	}
	if len(p.Instances(closedAt)) != 0 || len(p.Deployments()) != 0 {
		t.Fatal("forgotten instance still listed")
	}
	mustInvariants(t, p)
}

func mustReport(t testing.TB, s *Session, now time.Time, rep *Report) {
	t.Helper()
	if err := s.Report(now, rep); err != nil {
		t.Fatal(err)
	}
}

// TestReportFigures: a report's figures replace the last ones, its events
// are not kept in Last, and the snapshot carries them.
func TestReportFigures(t *testing.T) {
	_, p := newTestPool(t, Limits{})
	rep := &Report{Seq: 9, RunningRequests: 2, WaitingRequests: 3, QueuedPrefillTokens: 400, QueueMs: 12.5, HasQueueMs: true,
		KVCacheUsage: 0.5, KVCapacityBlocks: 100, PrefillTokensPerSecond: 2000, BlockSizeTokens: 32,
		ReportsCacheEvents: true, Stored: []uint64{1, 2}}
	connect(t, p, t0, "d", "a", rep)
	st := statusOf(t, p, t0, "a")
	if st.Last.Seq != 9 || st.Last.QueueMs != 12.5 || st.Last.Stored != nil || st.CachedBlocks != 2 ||
		st.Address != "a:8000" || st.Deployment != "d" || st.Pool != "p" {
		t.Fatalf("status %+v", st)
	}
	var pk Pick
	if err := p.Pick(t0, &PickInput{Hashes: []uint64{1, 2, 3}, PromptTokens: 100}, rand.New(rand.NewPCG(1, 1)), &pk); err != nil {
		t.Fatal(err)
	}
	got := pk.Snapshot.Instances[0]
	if got.QueueMs != 12.5 || !got.HasQueueMs || got.QueuedPrefillTokens != 400 || got.KVUsage != 0.5 ||
		got.PrefillTokensPerSecond != 2000 || got.BlockSizeTokens != 32 || got.MatchedBlocks != 2 || got.Disconnected {
		t.Fatalf("snapshot instance %+v", got)
	}
	if pk.Addresses[0] != "a:8000" || pk.Config != p.Config() {
		t.Fatalf("addresses %v config %p", pk.Addresses, pk.Config)
	}
}

// TestSecondConnectReplacesSession: a second stream for the same instance
// ends the first (Done closed, Report ErrSessionEnded, Close a no-op) and
// keeps the record, its cache and its slot.
func TestSecondConnectReplacesSession(t *testing.T) {
	_, p := newTestPool(t, Limits{})
	s1 := connect(t, p, t0, "d", "i", &Report{ReportsCacheEvents: true, Stored: []uint64{1, 2, 3}})
	if isClosed(s1.Done()) {
		t.Fatal("first session done before replacement")
	}
	s2, err := p.Connect(t0.Add(time.Second), Identity{Pool: "p", Deployment: "d", Instance: "i", Address: "new:1"})
	if err != nil {
		t.Fatal(err)
	}
	if !isClosed(s1.Done()) {
		t.Fatal("first session's Done not closed by the second Connect")
	}
	if isClosed(s2.Done()) {
		t.Fatal("second session's Done closed")
	}
	if err := s1.Report(t0.Add(time.Second), &Report{}); !errors.Is(err, ErrSessionEnded) {
		t.Fatalf("old session Report: %v, want ErrSessionEnded", err)
	}
	s1.Close(t0.Add(time.Second)) // must not disconnect the new session
	st := statusOf(t, p, t0.Add(time.Second), "i")
	if st.State != StateOK || st.Address != "new:1" || st.CachedBlocks != 3 {
		t.Fatalf("after replacement: %+v", st)
	}
	if _, n := p.IndexStats(); n != 3 {
		t.Fatalf("index pairs %d, want 3 (cache kept across reconnect)", n)
	}
	mustReport(t, s2, t0.Add(2*time.Second), &Report{ReportsCacheEvents: true})
	// A third replaces the second in turn.
	s3, err := p.Connect(t0.Add(3*time.Second), Identity{Pool: "p", Deployment: "d", Instance: "i", Address: "new:1"})
	if err != nil {
		t.Fatal(err)
	}
	if !isClosed(s2.Done()) || isClosed(s3.Done()) {
		t.Fatal("third Connect did not replace the second")
	}
	if _, ins := p.Counts(); ins != 1 {
		t.Fatalf("%d instances, want 1", ins)
	}
	mustInvariants(t, p)
}

// TestReconnectAfterClose: the instance comes back in the same deployment
// before forget_after and keeps its cache; Sweep within forget_after of its
// last report does not drop it.
func TestReconnectAfterClose(t *testing.T) {
	_, p := newTestPool(t, Limits{})
	s := connect(t, p, t0, "d", "i", &Report{ReportsCacheEvents: true, Stored: []uint64{1}})
	s.Close(t0)
	s2, err := p.Connect(t0.Add(5*time.Second), Identity{Pool: "p", Deployment: "d", Instance: "i", Address: "x"})
	if err != nil {
		t.Fatal(err)
	}
	if n := p.Sweep(t0.Add(30 * time.Second)); n != 0 {
		t.Fatalf("Sweep forgot %d connected instances", n)
	}
	if st := statusOf(t, p, t0.Add(5*time.Second), "i"); st.State != StateStale || st.CachedBlocks != 1 {
		// The reconnected stream has not reported yet: its last report is 5 s old.
		t.Fatalf("after reconnect: %+v", st)
	}
	mustReport(t, s2, t0.Add(5*time.Second), &Report{ReportsCacheEvents: true})
	if st := statusOf(t, p, t0.Add(5*time.Second), "i"); st.State != StateOK {
		t.Fatalf("after report: %v", st.State)
	}
	mustInvariants(t, p)
}

// TestReconnectOtherDeployment: an instance id that comes back in another
// deployment is forgotten (old session ended, cache dropped) and added anew.
func TestReconnectOtherDeployment(t *testing.T) {
	_, p := newTestPool(t, Limits{})
	old := connect(t, p, t0, "A", "i", &Report{ReportsCacheEvents: true, Stored: []uint64{1, 2}, QueuedPrefillTokens: 7})
	connect(t, p, t0, "A", "j", &Report{ReportsCacheEvents: true, Stored: []uint64{1}})
	s, err := p.Connect(t0.Add(time.Second), Identity{Pool: "p", Deployment: "B", Instance: "i", Address: "b"})
	if err != nil {
		t.Fatal(err)
	}
	if !isClosed(old.Done()) || isClosed(s.Done()) {
		t.Fatal("old session not ended")
	}
	if err := old.Report(t0, &Report{}); !errors.Is(err, ErrSessionEnded) {
		t.Fatalf("old Report: %v", err)
	}
	st := statusOf(t, p, t0.Add(time.Second), "i")
	if st.Deployment != "B" || st.CachedBlocks != 0 || st.Last.QueuedPrefillTokens != 0 {
		t.Fatalf("new record %+v", st)
	}
	if blocks, pairs := p.IndexStats(); blocks != 1 || pairs != 1 {
		t.Fatalf("index %d blocks %d pairs, want only j's block", blocks, pairs)
	}
	deps := p.Deployments()
	if len(deps) != 2 || deps[0].Deployment != "A" || deps[0].Instances != 1 || deps[1].Deployment != "B" || deps[1].Instances != 1 {
		t.Fatalf("deployments %+v", deps)
	}
	// When the old deployment had no one else, it disappears.
	connect(t, p, t0, "C", "k", nil)
	if _, err := p.Connect(t0, Identity{Pool: "p", Deployment: "B", Instance: "k", Address: "k"}); err != nil {
		t.Fatal(err)
	}
	for _, d := range p.Deployments() {
		if d.Deployment == "C" {
			t.Fatalf("empty unconfigured deployment C still listed: %+v", p.Deployments())
		}
	}
	mustInvariants(t, p)
}

// TestForgetDropsIndex: forget_after drops a disconnected instance and every
// index entry it had, in dense and sparse holder sets alike.
func TestForgetDropsIndex(t *testing.T) {
	_, p := newTestPool(t, Limits{})
	var sessions []*Session
	for i := range 200 {
		id := string(rune('a'+i%26)) + string(rune('a'+i/26))
		// Block 1 is held by all (dense), block 100+i by one (sparse).
		sessions = append(sessions, connect(t, p, t0, "d", id, &Report{ReportsCacheEvents: true, Stored: []uint64{1, uint64(100 + i)}}))
	}
	if blocks, pairs := p.IndexStats(); blocks != 201 || pairs != 400 {
		t.Fatalf("index %d/%d", blocks, pairs)
	}
	for i, s := range sessions {
		s.Close(t0.Add(time.Duration(i) * time.Millisecond))
	}
	forget := p.Config().Policy.ForgetAfter
	// Half of them are past forget_after.
	if n := p.Sweep(t0.Add(forget + 100*time.Millisecond)); n != 100 {
		t.Fatalf("first Sweep forgot %d, want 100", n)
	}
	if blocks, pairs := p.IndexStats(); blocks != 101 || pairs != 200 {
		t.Fatalf("after half: index %d/%d", blocks, pairs)
	}
	mustInvariants(t, p)
	if n := p.Sweep(t0.Add(forget + time.Second)); n != 100 {
		t.Fatalf("second Sweep forgot %d, want 100", n)
	}
	if blocks, pairs := p.IndexStats(); blocks != 0 || pairs != 0 {
		t.Fatalf("after all: index %d/%d, want 0/0", blocks, pairs)
	}
	mustInvariants(t, p)
	// Slots are reused from the lowest.
	connect(t, p, t0.Add(time.Hour), "d", "new", nil)
	p.mu.RLock()
	slot := p.byID["new"].slot
	p.mu.RUnlock()
	if slot != 0 {
		t.Fatalf("new instance in slot %d, want 0", slot)
	}
}

func TestMaxInstancesPerPool(t *testing.T) {
	_, p := newTestPool(t, Limits{MaxInstancesPerPool: 3})
	for _, id := range []string{"a", "b", "c"} {
		connect(t, p, t0, "d", id, nil)
	}
	_, err := p.Connect(t0, Identity{Pool: "p", Deployment: "d", Instance: "x", Address: "x"})
	if !errors.Is(err, ErrTooManyInstances) || !strings.Contains(err.Error(), `"p"`) || !strings.Contains(err.Error(), "limit is 3") {
		t.Fatalf("limit+1: %v", err)
	}
	// At the limit, existing instances may reconnect, even into another
	// deployment.
	if _, err := p.Connect(t0, Identity{Pool: "p", Deployment: "d", Instance: "a", Address: "a"}); err != nil {
		t.Fatalf("reconnect at the limit: %v", err)
	}
	if _, err := p.Connect(t0, Identity{Pool: "p", Deployment: "e", Instance: "b", Address: "b"}); err != nil {
		t.Fatalf("move deployment at the limit: %v", err)
	}
	if _, n := p.Counts(); n != 3 {
		t.Fatalf("%d instances", n)
	}
	// A forgotten instance frees its place.
	p.mu.Lock()
	s := p.byID["c"].session
	p.mu.Unlock()
	s.Close(t0)
	p.Sweep(t0.Add(time.Hour))
	if _, err := p.Connect(t0, Identity{Pool: "p", Deployment: "d", Instance: "x", Address: "x"}); err != nil {
		t.Fatalf("after forget: %v", err)
	}
	mustInvariants(t, p)
}

func TestMaxPools(t *testing.T) {
	r := NewRegistry(Limits{MaxPools: 2})
	for _, name := range []string{"a", "b"} {
		if _, err := r.Ensure(name); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := r.Ensure("c"); !errors.Is(err, ErrTooManyPools) || !strings.Contains(err.Error(), "limit is 2") {
		t.Fatalf("limit+1: %v", err)
	}
	if _, err := r.Ensure("a"); err != nil {
		t.Fatalf("existing pool at the limit: %v", err)
	}
	if err := r.CanHold("a"); err != nil {
		t.Fatalf("CanHold existing: %v", err)
	}
	if err := r.CanHold("c"); !errors.Is(err, ErrTooManyPools) {
		t.Fatalf("CanHold new: %v", err)
	}
	if err := r.CanHold(""); !errors.Is(err, ErrInvalidName) || !strings.Contains(err.Error(), "pool") {
		t.Fatalf("CanHold empty: %v", err)
	}
	if _, err := r.Pool("c"); !errors.Is(err, ErrPoolNotFound) || !strings.Contains(err.Error(), `"c"`) {
		t.Fatalf("Pool(c): %v", err)
	}
	if _, err := r.Ensure(strings.Repeat("x", 129)); err == nil || !strings.Contains(err.Error(), "pool") {
		t.Fatalf("long pool name: %v", err)
	}
	pools := r.Pools()
	if len(pools) != 2 || pools[0].Name() != "a" || pools[1].Name() != "b" {
		t.Fatalf("Pools %v", pools)
	}
	if got := r.Limits(); got.MaxPools != 2 || got.MaxInstancesPerPool != DefaultMaxInstancesPerPool {
		t.Fatalf("Limits %+v", got)
	}
}

// TestRegistrySweep forgets across pools: the disconnected instances and
// the connected ones silent past forget_after.
func TestRegistrySweep(t *testing.T) {
	r := NewRegistry(Limits{})
	for _, name := range []string{"a", "b"} {
		p, _ := r.Ensure(name)
		connect(t, p, t0, "d", "i", nil).Close(t0)
		connect(t, p, t0, "d", "j", nil)
	}
	if n := r.Sweep(t0.Add(30 * time.Second)); n != 0 {
		t.Fatalf("Sweep at forget_after forgot %d, want 0", n)
	}
	if n := r.Sweep(t0.Add(time.Hour)); n != 4 {
		t.Fatalf("Sweep forgot %d, want 4", n)
	}
}

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

func TestValidateIdentity(t *testing.T) {
	r := NewRegistry(Limits{})
	ok := Identity{Pool: "p", Deployment: "d", Instance: "i", Address: "10.0.0.1:8000"}
	n128 := strings.Repeat("n", 128)
	// 126 ASCII bytes + a 2-byte rune = 128 bytes.
	utf128 := strings.Repeat("n", 126) + "é"
	tests := []struct {
		name  string
		edit  func(*Identity)
		field string // "" = valid
	}{
		{"valid", func(*Identity) {}, ""},
		{"128-byte names", func(id *Identity) {
			id.Pool, id.Deployment, id.Instance, id.Address = n128, n128, n128, n128[:63]+"."+n128[:59]+":1"
		}, ""},
		{"128 bytes with multibyte rune", func(id *Identity) { id.Instance = utf128 }, ""},
		{"129-byte pool", func(id *Identity) { id.Pool = n128 + "x" }, "pool is 129 bytes"},
		{"129-byte deployment", func(id *Identity) { id.Deployment = n128 + "x" }, "deployment is 129 bytes"},
		{"129-byte instance", func(id *Identity) { id.Instance = utf128 + "x" }, "instance_id is 129 bytes"},
		{"129-byte address", func(id *Identity) { id.Address = n128 + "x" }, "address is 129 bytes"},
		{"empty pool", func(id *Identity) { id.Pool = "" }, "pool is empty"},
		{"empty deployment", func(id *Identity) { id.Deployment = "" }, "deployment is empty"},
		{"empty instance", func(id *Identity) { id.Instance = "" }, "instance_id is empty"},
		{"empty address", func(id *Identity) { id.Address = "" }, "address is empty"},
		{"invalid UTF-8", func(id *Identity) { id.Instance = "a\xffb" }, "instance_id is not valid UTF-8"},
		{"control character", func(id *Identity) { id.Deployment = "a\nb" }, "deployment contains control character U+000A"},
		{"DEL", func(id *Identity) { id.Address = "a\x7f" }, "address contains control character U+007F"},
		{"C1 control", func(id *Identity) { id.Pool = "a\u0085" }, "pool contains control character U+0085"},
		{"unicode letters ok", func(id *Identity) { id.Pool = "модель-池" }, ""},
		{"address without port", func(id *Identity) { id.Address = "10.0.0.1" }, `address "10.0.0.1" is not host:port (missing port in address)`},
		{"address port 0", func(id *Identity) { id.Address = "10.0.0.1:0" }, `address "10.0.0.1:0": port "0" is not a number in 1-65535`},
		{"address port 65536", func(id *Identity) { id.Address = "h:65536" }, `port "65536" is not a number in 1-65535`},
		{"address port 65535", func(id *Identity) { id.Address = "h:65535" }, ""},
		{"address IPv6", func(id *Identity) { id.Address = "[2001:db8::1]:8000" }, ""},
		{"address not a DNS name", func(id *Identity) { id.Address = "my_host:8000" }, `host "my_host" contains '_'`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			id := ok
			tc.edit(&id)
			err := r.ValidateIdentity(id)
			checkValidation(t, err, ErrInvalidReport, tc.field)
		})
	}
	// The limit is configurable.
	small := NewRegistry(Limits{MaxNameBytes: 4})
	if err := small.ValidateIdentity(Identity{Pool: "pppp", Deployment: "d", Instance: "i", Address: "aaaaa"}); err == nil ||
		!strings.Contains(err.Error(), "address is 5 bytes; the limit is 4") {
		t.Fatalf("MaxNameBytes 4: %v", err)
	}
}

func checkValidation(t *testing.T, err, sentinel error, field string) {
	t.Helper()
	if field == "" {
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		return
	}
	if !errors.Is(err, sentinel) {
		t.Fatalf("error %v, want %v", err, sentinel)
	}
	if !strings.Contains(err.Error(), field) {
		t.Fatalf("error %q does not mention %q", err, field)
	}
}

func TestValidateReport(t *testing.T) {
	r := NewRegistry(Limits{MaxBlockEvents: 10})
	nan, inf := math.NaN(), math.Inf(1)
	tests := []struct {
		name  string
		rep   Report
		field string
	}{
		{"zero report", Report{}, ""},
		{"kv 1.0 ok", Report{KVCacheUsage: 1.0}, ""},
		{"kv 0 ok", Report{KVCacheUsage: 0}, ""},
		{"kv 1.0000001", Report{KVCacheUsage: 1.0000001}, "kv_cache_usage is 1.0000001"},
		{"kv negative", Report{KVCacheUsage: -1e-300}, "kv_cache_usage"},
		{"kv NaN", Report{KVCacheUsage: nan}, "kv_cache_usage is NaN"},
		{"kv +Inf", Report{KVCacheUsage: inf}, "kv_cache_usage"},
		{"queue_ms 0 ok", Report{HasQueueMs: true}, ""},
		{"queue_ms huge ok", Report{HasQueueMs: true, QueueMs: 1e300}, ""},
		{"queue_ms negative", Report{HasQueueMs: true, QueueMs: -1}, "queue_ms is -1"},
		{"queue_ms NaN", Report{HasQueueMs: true, QueueMs: nan}, "queue_ms is NaN"},
		{"queue_ms Inf", Report{HasQueueMs: true, QueueMs: inf}, "queue_ms is +Inf"},
		{"queue_ms unset is not checked", Report{QueueMs: nan}, ""},
		{"prefill 0 ok", Report{PrefillTokensPerSecond: 0}, ""},
		{"prefill negative", Report{PrefillTokensPerSecond: -0.5}, "prefill_tokens_per_second is -0.5"},
		{"prefill NaN", Report{PrefillTokensPerSecond: nan}, "prefill_tokens_per_second is NaN"},
		{"prefill -Inf", Report{PrefillTokensPerSecond: -inf}, "prefill_tokens_per_second"},
		{"block size at limit", Report{BlockSizeTokens: 1 << 20}, ""},
		{"block size over limit", Report{BlockSizeTokens: 1<<20 + 1}, "block_size_tokens is 1048577"},
		{"events at limit", Report{Stored: make([]uint64, 6), Removed: make([]uint64, 4)}, ""},
		{"events over limit", Report{Stored: make([]uint64, 6), Removed: make([]uint64, 5)}, "11 block events (stored + removed); the limit is 10"},
		{"stored alone over limit", Report{Stored: make([]uint64, 11)}, "block events"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			checkValidation(t, r.ValidateReport(&tc.rep), ErrInvalidReport, tc.field)
		})
	}
	// The default limit.
	d := NewRegistry(Limits{})
	if err := d.ValidateReport(&Report{Stored: make([]uint64, DefaultMaxBlockEvents)}); err != nil {
		t.Fatal(err)
	}
	if err := d.ValidateReport(&Report{Stored: make([]uint64, DefaultMaxBlockEvents+1)}); !errors.Is(err, ErrInvalidReport) {
		t.Fatalf("default limit+1: %v", err)
	}
}

func TestValidatePick(t *testing.T) {
	r := NewRegistry(Limits{MaxPrefixBlocks: 16, MaxExcludes: 3})
	nan, inf := math.NaN(), math.Inf(1)
	f := func(v float64) *float64 { return &v }
	tests := []struct {
		name  string
		in    PickInput
		field string
	}{
		{"empty", PickInput{}, ""},
		{"prefix at limit", PickInput{Hashes: make([]uint64, 16)}, ""},
		{"prefix over limit", PickInput{Hashes: make([]uint64, 17)}, "prefix_hashes has 17 hashes; the limit is 16"},
		{"excludes at limit", PickInput{Exclude: []string{"a", "b"}, Overrides: []Override{{Instance: "c"}}}, ""},
		{"excludes over limit", PickInput{Exclude: []string{"a", "b"}, Overrides: []Override{{Instance: "c"}, {Instance: "d"}}},
			"exclude_instances + load_snapshot.instances has 4 entries; the limit is 3"},
		{"override queue_ms ok", PickInput{Overrides: []Override{{QueueMs: f(0)}}}, ""},
		{"override queue_ms negative", PickInput{Overrides: []Override{{}, {QueueMs: f(-1)}}}, "load_snapshot.instances[1].queue_ms is -1"},
		{"override queue_ms NaN", PickInput{Overrides: []Override{{QueueMs: &nan}}}, "load_snapshot.instances[0].queue_ms is NaN"},
		{"override queue_ms Inf", PickInput{Overrides: []Override{{QueueMs: &inf}}}, "queue_ms is +Inf"},
		{"override prefill NaN", PickInput{Overrides: []Override{{PrefillTokensPerSecond: &nan}}}, "load_snapshot.instances[0].prefill_tokens_per_second is NaN"},
		{"override prefill negative", PickInput{Overrides: []Override{{PrefillTokensPerSecond: f(-2)}}}, "prefill_tokens_per_second is -2"},
		{"override kv 1.0 ok", PickInput{Overrides: []Override{{KVCacheUsage: f(1.0)}}}, ""},
		{"override kv 1.0000001", PickInput{Overrides: []Override{{KVCacheUsage: f(1.0000001)}}}, "load_snapshot.instances[0].kv_cache_usage is 1.0000001"},
		{"override kv negative", PickInput{Overrides: []Override{{KVCacheUsage: f(-0.1)}}}, "kv_cache_usage is -0.1"},
		{"override kv NaN", PickInput{Overrides: []Override{{KVCacheUsage: &nan}}}, "kv_cache_usage is NaN"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			checkValidation(t, r.ValidatePick(&tc.in), ErrInvalidPick, tc.field)
		})
	}
	d := NewRegistry(Limits{})
	if err := d.ValidatePick(&PickInput{Hashes: make([]uint64, DefaultMaxPrefixBlocks)}); err != nil {
		t.Fatal(err)
	}
	if err := d.ValidatePick(&PickInput{Hashes: make([]uint64, DefaultMaxPrefixBlocks+1)}); !errors.Is(err, ErrInvalidPick) {
		t.Fatalf("default limit+1: %v", err)
	}
}

// TestLimitsDefaults: zero and negative fields take their defaults.
func TestLimitsDefaults(t *testing.T) {
	want := Limits{DefaultMaxPools, DefaultMaxInstancesPerPool, DefaultMaxPrefixBlocks, DefaultMaxBlockEvents,
		DefaultMaxExcludes, DefaultMaxBlocksPerInstance, DefaultMaxIndexPairs, DefaultMaxNameBytes}
	if got := (Limits{}).withDefaults(); got != want {
		t.Fatalf("zero: %+v", got)
	}
	if got := (Limits{MaxPools: -1, MaxNameBytes: 7}).withDefaults(); got.MaxPools != DefaultMaxPools || got.MaxNameBytes != 7 {
		t.Fatalf("partial: %+v", got)
	}
}
