package replica

import (
	"errors"
	"sync"
	"testing"
	"time"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/internal/natstest"
	"github.com/prefixroute/prefixroute/internal/state"
	"github.com/prefixroute/prefixroute/internal/testwait"
)

// xID is the instance of these tests; it reports to r1.
var xID = state.Identity{Pool: "chat", Deployment: "a", Instance: "x", Address: "10.0.0.1:8000"}

// cacheReport is a report of x with k new blocks, numbered from *next on.
func cacheReport(next *uint64, k int) *pb.ReportLoadRequest {
	m := &pb.ReportLoadRequest{ReportsCacheEvents: true, KvCapacityBlocks: 1 << 16, PrefillTokensPerSecond: 10000}
	for range k {
		m.StoredBlockHashes = append(m.StoredBlockHashes, *next)
		*next++
	}
	return m
}

// TestReplicaSnapshotGapAskedAgain: the peer answering a joining replica's
// snapshot request is behind on events (its event handling is held here),
// so its snapshot predates reports that were published before the joiner
// subscribed: the joiner never receives them. The joiner notices the gap
// in the instance's report numbers at the next report and asks for the
// snapshot again; it ends with exactly the instance's cache.
func TestReplicaSnapshotGapAskedAgain(t *testing.T) {
	ns := natstest.Start(t)
	r1, h1 := startReplica(t, ns.URL(), "r1", 2*time.Second)
	r2, h2 := startReplica(t, ns.URL(), "r2", 2*time.Second)
	// Only r2 answers snapshot requests, so the joiner's view comes from a
	// replica for which the instance is remote.
	if err := r1.link.Load().ServeSnapshots(nil); err != nil {
		t.Fatal(err)
	}
	x := connect(t, r1, h1, xID)
	next := uint64(1)
	x.report(cacheReport(&next, 100))
	testwait.EventuallyWithin(t, 10*time.Second, "r2 has x's 100 blocks", func() bool { return cachedBlocks(h2, "chat") == 100 })

	// r2 falls behind: its event handling is held while x reports 5 times.
	r2.cu.applyMu.Lock()
	held := true
	defer func() {
		if held {
			r2.cu.applyMu.Unlock()
		}
	}()
	for range 5 {
		x.report(cacheReport(&next, 10))
	}
	r3, h3 := startReplica(t, ns.URL(), "r3", 2*time.Second)
	testwait.EventuallyWithin(t, 10*time.Second, "r3 imported r2's stale view", func() bool { return cachedBlocks(h3, "chat") == 100 })
	r2.cu.applyMu.Unlock()
	held = false
	testwait.EventuallyWithin(t, 10*time.Second, "r2 caught up", func() bool { return cachedBlocks(h2, "chat") == 150 })

	// x's next report reveals the gap to r3.
	x.report(cacheReport(&next, 1))
	took := testwait.EventuallyWithin(t, 10*time.Second, "r3 holds x's whole cache", func() bool { return cachedBlocks(h3, "chat") == 151 })
	st := r3.link.Load().Stats()
	t.Logf("r3 whole %v after the report that revealed the gap; snapshots requested %d", took, st.SnapshotsRequested)
	if st.SnapshotsRequested < 2 {
		t.Errorf("snapshots requested %d, want a second one", st.SnapshotsRequested)
	}
	if got := cachedBlocks(h1, "chat"); got != 151 {
		t.Errorf("r1 has %d blocks of x, want 151", got)
	}
}

// TestReplicaSnapshotAskedAgainAfterFailure: the only peer fails the
// joining replica's first snapshot request (as one too busy to answer in
// time would). The joiner, which hears from other replicas, asks again and
// gets the instance's whole cache, which reports alone never resend.
func TestReplicaSnapshotAskedAgainAfterFailure(t *testing.T) {
	ns := natstest.Start(t)
	r1, h1 := startReplica(t, ns.URL(), "r1", time.Second)
	failed := make(chan struct{})
	var once sync.Once
	if err := r1.link.Load().ServeSnapshots(func(pool string) ([]byte, error) {
		first := false
		once.Do(func() { first = true; close(failed) })
		if first {
			return nil, errors.New("busy")
		}
		return r1.snapshot(pool)
	}); err != nil {
		t.Fatal(err)
	}
	x := connect(t, r1, h1, xID)
	next := uint64(1)
	x.report(cacheReport(&next, 100))

	r3, h3 := startReplica(t, ns.URL(), "r3", time.Second)
	select {
	case <-failed:
	case <-time.After(testwait.DefaultTimeout):
		t.Fatalf("r3 asked r1 for no snapshot within %v", testwait.DefaultTimeout)
	}
	// r3 hears from r1 while its request is failing.
	x.report(cacheReport(&next, 0))
	took := testwait.EventuallyWithin(t, 10*time.Second, "r3 has x's cache", func() bool { return cachedBlocks(h3, "chat") == 100 })
	if n := r3.link.Load().Stats().SnapshotsRequested; n < 2 {
		t.Errorf("snapshots requested %d, want at least 2: the failed one, then the one asked again", n)
	}
	t.Logf("r3 has x's cache %v after the failed request", took)
}
