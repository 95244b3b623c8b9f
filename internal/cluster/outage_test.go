package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prefixroute/prefixroute/internal/natstest"
	"github.com/prefixroute/prefixroute/internal/testwait"
)

// stateLog records OnState calls.
type stateLog struct {
	mu     sync.Mutex
	states []State
}

func (s *stateLog) handler(st State) { s.mu.Lock(); s.states = append(s.states, st); s.mu.Unlock() }

func (s *stateLog) get() []State {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]State(nil), s.states...)
}

func TestNATSOutageAndRestart(t *testing.T) {
	ns := natstest.Start(t)
	var (
		links  []*Link
		cfgs   []*configLog
		evs    []*eventLog
		states []*stateLog
	)
	for _, name := range []string{"a", "b", "c"} {
		cl, el, sl := &configLog{}, &eventLog{}, &stateLog{}
		cfg := testConfig(ns.URL(), name)
		cfg.MaxBatchBytes, cfg.MaxPendingBytes = 4<<10, 16<<10
		links = append(links, dial(t, cfg, Handlers{OnConfig: cl.handler, OnEvents: el.handler, OnState: sl.handler}))
		cfgs, evs, states = append(cfgs, cl), append(evs, el), append(states, sl)
	}
	a := links[0]
	ctx := context.Background()
	rev, err := a.Create(ctx, "weights.p", []byte("before"))
	if err != nil {
		t.Fatal(err)
	}

	ns.Stop()
	for i, l := range links {
		testwait.EventuallyWithin(t, 5*time.Second, l.Name()+" disconnected", func() bool { return l.State() == StateDisconnected })
		if s := states[i].get(); len(s) == 0 || s[len(s)-1] != StateDisconnected {
			t.Fatalf("%s OnState calls %v, want ... disconnected", l.Name(), s)
		}
	}

	// KV calls fail fast with ErrUnavailable (bound: ApplyTimeout = 2s).
	kvOps := map[string]func() error{
		"Get":     func() error { _, err := a.Get(ctx, "weights.p"); return err },
		"Create":  func() error { _, err := a.Create(ctx, "weights.q", nil); return err },
		"Update":  func() error { _, err := a.Update(ctx, "weights.p", []byte("x"), rev); return err },
		"Delete":  func() error { return a.Delete(ctx, "weights.p", 0) },
		"History": func() error { _, err := a.History(ctx, "weights.p"); return err },
		"Flush":   func() error { return a.Flush(ctx) },
		"Snapshot": func() error {
			_, _, err := a.RequestSnapshot(ctx, "p")
			return err
		},
	}
	for name, op := range kvOps {
		start := time.Now()
		err := op()
		d := time.Since(start)
		if !errors.Is(err, ErrUnavailable) {
			t.Fatalf("%s while NATS is down: %v, want ErrUnavailable", name, err)
		}
		if d > a.cfg.ApplyTimeout {
			t.Fatalf("%s took %v, more than ApplyTimeout %v", name, d, a.cfg.ApplyTimeout)
		}
		t.Logf("%s while down: ErrUnavailable in %v", name, d)
	}

	// Publish never blocks; the 16 KiB outbox overflows and counts drops.
	payload := make([]byte, 200)
	var slowest time.Duration
	slowestAt := 0
	start := time.Now()
	for i := range 20000 {
		t0 := time.Now()
		if err := a.Publish("p", payload); err != nil {
			t.Fatalf("Publish %d while down: %v", i, err)
		}
		if d := time.Since(t0); d > slowest {
			slowest, slowestAt = d, i
		}
	}
	total := time.Since(start)
	st := a.Stats()
	t.Logf("20000 Publish calls while down: %v total, slowest %v (call %d); dropped %d events in %d batches, pending %d bytes",
		total, slowest, slowestAt, st.DroppedEvents, st.DroppedBatches, st.PendingBytes)
	// A Publish that waited for the network would hang here until the
	// restart below; the bounds only absorb scheduling noise on a shared
	// 2-core machine (typical: ~40ms total, slowest <1ms with -race).
	if total > 5*time.Second || slowest > 2*time.Second {
		t.Fatalf("Publish blocked: total %v, slowest call %v", total, slowest)
	}
	if st.DroppedEvents == 0 || st.PendingBytes > 16<<10+4<<10 {
		t.Fatalf("outbox not bounded: dropped %d, pending %d", st.DroppedEvents, st.PendingBytes)
	}

	ns.Restart()
	for _, l := range links {
		testwait.EventuallyWithin(t, 10*time.Second, l.Name()+" reconnected", func() bool { return l.State() == StateConnected })
	}
	// KV works again, and every watch (its consumer died with the
	// server) resumes: all three see the new revision.
	var newRev uint64
	testwait.EventuallyWithin(t, 10*time.Second, "Update after restart", func() bool {
		newRev, err = a.Update(ctx, "weights.p", []byte("after"), rev)
		return err == nil
	})
	for i, cl := range cfgs {
		testwait.EventuallyWithin(t, 10*time.Second, fmt.Sprintf("%s to see rev %d", links[i].Name(), newRev), func() bool {
			_, ok := cl.seenAt("weights.p", newRev)
			return ok
		})
	}
	// Events flow again (the outbox's surviving batches arrive first).
	before := len(evs[1].of("a", "after"))
	if err := a.Publish("after", []byte("x")); err != nil {
		t.Fatal(err)
	}
	testwait.EventuallyWithin(t, 5*time.Second, "events after restart", func() bool {
		return len(evs[1].of("a", "after")) > before && len(evs[2].of("a", "after")) > before
	})
	if st := a.Stats(); st.Reconnects == 0 || st.Disconnects == 0 {
		t.Fatalf("stats after restart: %+v", st)
	}
	for i, cl := range cfgs {
		cl.checkOrdered(t, links[i].Name())
	}
}

func TestWatchDeliversChangesMadeWhileAway(t *testing.T) {
	ns := natstest.Start(t)
	proxy := natstest.StartProxy(t, ns.Addr())
	a := dial(t, testConfig(ns.URL(), "a"), Handlers{})
	cl, el := &configLog{}, &eventLog{}
	c := dial(t, testConfig(proxy.URL(), "c"), Handlers{OnConfig: cl.handler, OnEvents: el.handler})
	ctx := context.Background()

	rev, err := a.Create(ctx, "k1", []byte("0"))
	if err != nil {
		t.Fatal(err)
	}
	testwait.EventuallyWithin(t, 5*time.Second, "c to see k1", func() bool { _, ok := cl.seenAt("k1", rev); return ok })

	proxy.Cut()
	testwait.EventuallyWithin(t, 5*time.Second, "c disconnected", func() bool { return c.State() == StateDisconnected })
	var want []uint64 // written while c is away
	for i := 1; i <= 5; i++ {
		if rev, err = a.Update(ctx, "k1", fmt.Appendf(nil, "%d", i), rev); err != nil {
			t.Fatal(err)
		}
		want = append(want, rev)
	}
	r2, err := a.Create(ctx, "k2", []byte("new"))
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Delete(ctx, "k2", r2); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(ctx, "k1"); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("c.Get while away: %v", err)
	}

	proxy.Restore()
	testwait.EventuallyWithin(t, 10*time.Second, "c reconnected", func() bool { return c.State() == StateConnected })
	testwait.EventuallyWithin(t, 10*time.Second, "c to catch up", func() bool {
		e := cl.snapshot()
		return len(e) > 0 && e[len(e)-1].Key == "k2" && e[len(e)-1].Deleted
	})
	got := cl.snapshot()
	var k1 []uint64
	for _, e := range got[1:] {
		if e.Key == "k1" {
			k1 = append(k1, e.Revision)
		}
	}
	if fmt.Sprint(k1) != fmt.Sprint(want) {
		t.Fatalf("k1 revisions delivered after reconnect %v, want every one written while away %v", k1, want)
	}
	cl.checkOrdered(t, "c")
	if st := c.Stats(); st.WatchRestarts == 0 {
		t.Fatalf("WatchRestarts = 0 after a reconnect")
	}
	// Events from a reach c again.
	if err := a.Publish("p", []byte("hi")); err != nil {
		t.Fatal(err)
	}
	testwait.EventuallyWithin(t, 5*time.Second, "event after reconnect", func() bool { return len(el.of("a", "p")) == 1 })
}

func TestUnresponsiveServerBoundedByApplyTimeout(t *testing.T) {
	ns := natstest.Start(t)
	proxy := natstest.StartProxy(t, ns.Addr())
	a := dial(t, testConfig(ns.URL(), "a"), Handlers{})
	cfg := testConfig(proxy.URL(), "c")
	cfg.ApplyTimeout = 500 * time.Millisecond
	cfg.SnapshotTimeout = 500 * time.Millisecond // the first chunk's wait
	c := dial(t, cfg, Handlers{OnConfig: func(string, []byte, uint64, bool) {}})
	ctx := context.Background()
	rev, err := a.Create(ctx, "k", []byte("0"))
	if err != nil {
		t.Fatal(err)
	}

	proxy.Freeze() // TCP stays up, nothing answers
	for name, op := range map[string]func() error{
		"Get":     func() error { _, err := c.Get(ctx, "k"); return err },
		"Update":  func() error { _, err := c.Update(ctx, "k", []byte("1"), rev); return err },
		"History": func() error { _, err := c.History(ctx, "k"); return err },
		"Snapshot": func() error {
			_, _, err := c.RequestSnapshot(ctx, "p")
			return err
		},
	} {
		start := time.Now()
		err := op()
		d := time.Since(start)
		t.Logf("%s against a frozen server: %v after %v", name, err, d)
		if !errors.Is(err, ErrUnavailable) && !errors.Is(err, ErrNoPeers) {
			t.Fatalf("%s: %v, want ErrUnavailable", name, err)
		}
		if d > cfg.ApplyTimeout+time.Second {
			t.Fatalf("%s took %v, ApplyTimeout is %v", name, d, cfg.ApplyTimeout)
		}
	}
	start := time.Now()
	for range 5000 { // ~1 MB: more than the socket buffers take
		if err := c.Publish("p", make([]byte, 200)); err != nil {
			t.Fatal(err)
		}
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("Publish against a frozen server took %v", d)
	}
	proxy.Unfreeze()
	testwait.EventuallyWithin(t, 10*time.Second, "c usable again", func() bool {
		_, err := c.Get(ctx, "k")
		return err == nil
	})
}
