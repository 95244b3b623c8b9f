package server

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/internal/cluster"
	"github.com/prefixroute/prefixroute/internal/natstest"
)

// TestReplicaSnapshotGapAskedAgain: the peer answering a joining replica's
// snapshot request is behind on events (its event handling is held here),
// so its snapshot predates reports that were published before the joiner
// subscribed: the joiner never receives them. The joiner notices the gap
// in the instance's report numbers at the next report and asks for the
// snapshot again; it ends with exactly the instance's cache.
func TestReplicaSnapshotGapAskedAgain(t *testing.T) {
	ns := natstest.Start(t)
	clock := &obsClock{t: time.Unix(1_800_000_000, 0)}
	replica := func(name string) *Daemon {
		return obsStart(t, func(c *DaemonConfig) {
			c.Server.Now = clock.Now
			c.Server.RampTick = time.Hour
			c.Server.Cluster = &cluster.Config{URLs: []string{ns.URL()}, Name: name, FlushInterval: time.Millisecond,
				ApplyTimeout: 2 * time.Second, ReconnectWait: 50 * time.Millisecond}
		})
	}
	r1, r2 := replica("r1"), replica("r2")
	// Only r2 answers snapshot requests, so the joiner's view comes from a
	// replica for which the instance is remote.
	if err := r1.srv.repl.link.Load().ServeSnapshots(nil); err != nil {
		t.Fatal(err)
	}
	_, load1, admin1 := obsClients(t, r1)
	_, _, admin2 := obsClients(t, r2)
	x := obsConnect(t, load1)
	next := uint64(1)
	report := func(k int) { // k new blocks
		m := &pb.ReportLoadRequest{Pool: "chat", Deployment: "a", InstanceId: "x", Address: "10.0.0.1:8000",
			ReportsCacheEvents: true, KvCapacityBlocks: 1 << 16}
		for range k {
			m.StoredBlockHashes = append(m.StoredBlockHashes, next)
			next++
		}
		x.report(m)
	}
	cached := func(admin pb.AdminServiceClient) uint64 {
		l, err := admin.ListInstances(context.Background(), &pb.ListInstancesRequest{Pool: "chat"})
		if err != nil || len(l.GetInstances()) != 1 {
			return 0
		}
		return l.GetInstances()[0].GetCachedBlocks()
	}
	wait := func(what string, cond func() bool) {
		t.Helper()
		for start := time.Now(); !cond(); time.Sleep(5 * time.Millisecond) {
			if time.Since(start) > 10*time.Second {
				t.Fatalf("%s: not after 10 s", what)
			}
		}
	}
	report(100)
	wait("r2 has x's 100 blocks", func() bool { return cached(admin2) == 100 })

	// r2 falls behind: its event handling is held while x reports 5 times.
	r2.srv.repl.applyMu.Lock()
	held := true
	defer func() {
		if held {
			r2.srv.repl.applyMu.Unlock()
		}
	}()
	for range 5 {
		report(10)
	}
	r3 := replica("r3")
	_, _, admin3 := obsClients(t, r3)
	wait("r3 imported r2's stale view", func() bool { return cached(admin3) == 100 })
	r2.srv.repl.applyMu.Unlock()
	held = false
	wait("r2 caught up", func() bool { return cached(admin2) == 150 })

	// x's next report reveals the gap to r3.
	report(1)
	start := time.Now()
	wait("r3 holds x's whole cache", func() bool { return cached(admin3) == 151 })
	st := r3.srv.repl.link.Load().Stats()
	t.Logf("r3 whole %v after the report that revealed the gap; snapshots requested %d", time.Since(start), st.SnapshotsRequested)
	if st.SnapshotsRequested < 2 {
		t.Errorf("snapshots requested %d, want a second one", st.SnapshotsRequested)
	}
	if got := cached(admin1); got != 151 {
		t.Errorf("r1 has %d blocks of x, want 151", got)
	}
}

// TestReplicaSnapshotAskedAgainAfterFailure: the only peer fails the
// joining replica's first snapshot request (as one too busy to answer in
// time would). The joiner, which hears from other replicas, asks again and
// gets the instance's whole cache, which reports alone never resend.
func TestReplicaSnapshotAskedAgainAfterFailure(t *testing.T) {
	ns := natstest.Start(t)
	clock := &obsClock{t: time.Unix(1_800_000_000, 0)}
	replica := func(name string) *Daemon {
		return obsStart(t, func(c *DaemonConfig) {
			c.Server.Now = clock.Now
			c.Server.RampTick = time.Hour
			c.Server.Cluster = &cluster.Config{URLs: []string{ns.URL()}, Name: name, FlushInterval: time.Millisecond,
				ApplyTimeout: time.Second, ReconnectWait: 50 * time.Millisecond}
		})
	}
	r1 := replica("r1")
	l1 := r1.srv.repl.link.Load()
	failed := make(chan struct{})
	var once sync.Once
	if err := l1.ServeSnapshots(func(pool string) ([]byte, error) {
		first := false
		once.Do(func() { first = true; close(failed) })
		if first {
			return nil, errors.New("busy")
		}
		return r1.srv.repl.snapshot(pool)
	}); err != nil {
		t.Fatal(err)
	}
	_, load1, _ := obsClients(t, r1)
	x := obsConnect(t, load1)
	m := &pb.ReportLoadRequest{Pool: "chat", Deployment: "a", InstanceId: "x", Address: "10.0.0.1:8000",
		ReportsCacheEvents: true, KvCapacityBlocks: 1 << 16}
	for h := range uint64(100) {
		m.StoredBlockHashes = append(m.StoredBlockHashes, h+1)
	}
	x.report(m)

	r3 := replica("r3")
	_, _, admin3 := obsClients(t, r3)
	<-failed
	// r3 hears from r1 while its request is failing.
	x.report(&pb.ReportLoadRequest{ReportsCacheEvents: true, KvCapacityBlocks: 1 << 16})
	start := time.Now()
	for {
		l, err := admin3.ListInstances(context.Background(), &pb.ListInstancesRequest{Pool: "chat"})
		if err == nil && len(l.GetInstances()) == 1 && l.GetInstances()[0].GetCachedBlocks() == 100 {
			break
		}
		if time.Since(start) > 10*time.Second {
			t.Fatalf("r3 never got x's cache: %v %v", l, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Logf("r3 has x's cache %v after the failed request; snapshots requested %d",
		time.Since(start), r3.srv.repl.link.Load().Stats().SnapshotsRequested)
}
