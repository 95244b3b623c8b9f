package cluster

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prefixroute/prefixroute/internal/natstest"
	"github.com/prefixroute/prefixroute/internal/testwait"
)

func TestSnapshotAnsweredByPeer(t *testing.T) {
	ns := natstest.Start(t)
	a := dial(t, testConfig(ns.URL(), "a"), Handlers{})
	b := dial(t, testConfig(ns.URL(), "b"), Handlers{})
	if err := a.ServeSnapshots(func(pool string) ([]byte, error) { return []byte("from a " + pool), nil }); err != nil {
		t.Fatal(err)
	}
	if err := b.ServeSnapshots(func(pool string) ([]byte, error) { return []byte("from b " + pool), nil }); err != nil {
		t.Fatal(err)
	}
	// a serves too, but never answers itself.
	for _, pool := range []string{"p1", "dotted.pool name"} {
		data, origin, err := a.RequestSnapshot(context.Background(), pool)
		if err != nil || origin != "b" || string(data) != "from b "+pool {
			t.Fatalf("RequestSnapshot(%q) = %q, %q, %v; want b's answer", pool, data, origin, err)
		}
	}
	// Empty snapshot is a valid answer.
	_ = b.ServeSnapshots(func(string) ([]byte, error) { return nil, nil })
	if data, _, err := a.RequestSnapshot(context.Background(), "p"); err != nil || len(data) != 0 {
		t.Fatalf("empty snapshot: %q, %v", data, err)
	}
}

func TestSnapshot5MiBReassembled(t *testing.T) {
	ns := natstest.Start(t)
	a := dial(t, testConfig(ns.URL(), "a"), Handlers{})
	var want [2][]byte
	var calls atomic.Int32
	var servers []*Link
	for i, name := range []string{"b", "c"} { // two responders: first answer wins
		want[i] = make([]byte, 5<<20+12345)
		r := rand.New(rand.NewPCG(uint64(i), 7))
		for j := range want[i] {
			want[i][j] = byte(r.Uint32())
		}
		l := dial(t, testConfig(ns.URL(), name), Handlers{})
		servers = append(servers, l)
		if err := l.ServeSnapshots(func(string) ([]byte, error) { calls.Add(1); return want[i], nil }); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		start := time.Now()
		data, origin, err := a.RequestSnapshot(context.Background(), "big")
		if err != nil {
			t.Fatal(err)
		}
		idx := map[string]int{"b": 0, "c": 1}[origin]
		if !bytes.Equal(data, want[idx]) {
			t.Fatalf("snapshot from %s: %d bytes, not equal to the %d sent", origin, len(data), len(want[idx]))
		}
		t.Logf("5 MiB snapshot from %s in %v", origin, time.Since(start))
	}
	// Both responders ran their handler each time, but only the winner
	// streamed to the end: the loser was cancelled after chunk 0.
	testwait.EventuallyWithin(t, 5*time.Second, "both handlers called 3 times", func() bool { return calls.Load() == 6 })
	served := func() uint64 { return servers[0].Stats().SnapshotsServed + servers[1].Stats().SnapshotsServed }
	testwait.EventuallyWithin(t, 5*time.Second, "3 completed streams", func() bool { return served() >= 3 })
	// Close waits for every responder goroutine to return, so after it the
	// count is final: a loser that streamed to the end would show here.
	servers[0].Close()
	servers[1].Close()
	if s := served(); s != 3 {
		t.Fatalf("%d completed snapshot streams for 3 requests", s)
	}
}

func TestSnapshotNoPeers(t *testing.T) {
	ns := natstest.Start(t)
	a := dial(t, testConfig(ns.URL(), "a"), Handlers{})
	dial(t, testConfig(ns.URL(), "b"), Handlers{}) // connected, not serving

	// The fast path is told by its error, not by a clock: only the
	// server's no-responders status says "no replica serves snapshots";
	// the slow path waits SnapshotTimeout and says no replica answered.
	const fast = "no replica serves snapshots"
	start := time.Now()
	_, _, err := a.RequestSnapshot(context.Background(), "p")
	if !errors.Is(err, ErrNoPeers) || !strings.Contains(err.Error(), fast) {
		t.Fatalf("nobody serving: %v, want ErrNoPeers by the no-responders fast path (%q)", err, fast)
	}
	t.Logf("no peer -> ErrNoPeers in %v", time.Since(start))

	// Only the requester itself serves: still no peer (no-echo).
	_ = a.ServeSnapshots(func(string) ([]byte, error) { return []byte("self"), nil })
	start = time.Now()
	if _, _, err := a.RequestSnapshot(context.Background(), "p"); !errors.Is(err, ErrNoPeers) || !strings.Contains(err.Error(), fast) {
		t.Fatalf("only self serving: %v, want ErrNoPeers by the no-responders fast path (%q)", err, fast)
	}
	t.Logf("self only -> ErrNoPeers in %v", time.Since(start))
}

func TestSnapshotHandlerError(t *testing.T) {
	ns := natstest.Start(t)
	cfg := testConfig(ns.URL(), "a")
	cfg.ApplyTimeout = 300 * time.Millisecond
	a := dial(t, cfg, Handlers{})
	b := dial(t, testConfig(ns.URL(), "b"), Handlers{})
	_ = b.ServeSnapshots(func(string) ([]byte, error) { return nil, errors.New("pool unknown") })
	_, _, err := a.RequestSnapshot(context.Background(), "p")
	if !errors.Is(err, ErrNoPeers) || !bytes.Contains([]byte(err.Error()), []byte("pool unknown")) {
		t.Fatalf("failing peer: %v, want ErrNoPeers mentioning the handler error", err)
	}
	// A second, working peer wins over the failing one.
	c := dial(t, testConfig(ns.URL(), "c"), Handlers{})
	_ = c.ServeSnapshots(func(string) ([]byte, error) { return []byte("ok"), nil })
	data, origin, err := a.RequestSnapshot(context.Background(), "p")
	if err != nil || origin != "c" || string(data) != "ok" {
		t.Fatalf("with a working peer: %q, %q, %v", data, origin, err)
	}
	// Unregistering stops answers.
	_ = c.ServeSnapshots(nil)
	if _, _, err := a.RequestSnapshot(context.Background(), "p"); !errors.Is(err, ErrNoPeers) {
		t.Fatalf("after ServeSnapshots(nil): %v", err)
	}
}
