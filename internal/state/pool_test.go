package state

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
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
