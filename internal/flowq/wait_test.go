package flowq

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/prefixroute/prefixroute/internal/testwait"
)

// 10,000 picks wait, each in its own (the caller's) goroutine; all are
// canceled; every Wait returns ErrCanceled, the queue is empty and no
// goroutine is left behind.
func TestTenThousandCanceled(t *testing.T) {
	defer goleak.VerifyNone(t)
	const n = 10000
	q := New(Limits{MaxWaiting: n, MaxPerBand: n})
	ctx, cancel := context.WithCancel(context.Background())
	before := runtime.NumGoroutine()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		tk := mustEnqueue(t, q, testwait.Epoch, Item{Flow: "f", Priority: int32(i % 4), Tokens: 10})
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- q.Wait(ctx, tk, nil)
		}()
	}
	if q.Len() != n {
		t.Fatalf("Len %d, want %d", q.Len(), n)
	}
	// The waiting adds exactly the callers' goroutines.
	if g := runtime.NumGoroutine() - before; g > n {
		t.Errorf("%d goroutines for %d waiting picks", g, n)
	}
	cancel()
	wg.Wait()
	close(errs)
	for err := range errs {
		if !errors.Is(err, ErrCanceled) {
			t.Fatalf("Wait returned %v, want ErrCanceled", err)
		}
	}
	if q.Len() != 0 || len(q.bands) != 0 || len(q.deadline) != 0 {
		t.Errorf("after cancel: Len %d, bands %d, heap %d; want 0", q.Len(), len(q.bands), len(q.deadline))
	}
	if s := q.Stats(); s.Canceled != n {
		t.Errorf("Stats.Canceled %d, want %d", s.Canceled, n)
	}
}

func TestWaitOutcomes(t *testing.T) {
	q := New(big)
	bg := context.Background()

	// Granted by a Kick: Wait returns nil.
	a := mustEnqueue(t, q, testwait.Epoch, Item{Flow: "a"})
	q.Kick()
	if err := q.Wait(bg, a, nil); err != nil {
		t.Fatalf("granted: %v", err)
	}
	q.Settle(a, Dispatched)

	// The caller's timer fires: queue_timeout, and the ticket is gone.
	b := mustEnqueue(t, q, testwait.Epoch, Item{Flow: "a"})
	fired := make(chan time.Time, 1)
	fired <- testwait.Epoch
	if err := q.Wait(bg, b, fired); !errors.Is(err, ErrQueueTimeout) || q.Len() != 0 {
		t.Fatalf("timer: %v, Len %d; want queue_timeout, 0", err, q.Len())
	}

	// The context's deadline passed: queue_timeout, not canceled.
	c := mustEnqueue(t, q, testwait.Epoch, Item{Flow: "a"})
	dctx, cancel := context.WithDeadline(bg, time.Unix(0, 0))
	defer cancel()
	if err := q.Wait(dctx, c, nil); !errors.Is(err, ErrQueueTimeout) {
		t.Fatalf("context deadline: %v, want queue_timeout", err)
	}

	// Expire removed it: Wait says queue_timeout.
	d := mustEnqueue(t, q, testwait.Epoch, Item{Flow: "a", Deadline: testwait.Epoch})
	q.Expire(testwait.Epoch)
	if err := q.Wait(bg, d, nil); !errors.Is(err, ErrQueueTimeout) {
		t.Fatalf("expired: %v, want queue_timeout", err)
	}
}

// A grant that races with a cancel is passed on to the next ticket: the
// capacity is not lost.
func TestGrantRacingCancelPassesOn(t *testing.T) {
	q := New(big)
	a := mustEnqueue(t, q, testwait.Epoch, Item{Flow: "a"})
	b := mustEnqueue(t, q, testwait.Epoch, Item{Flow: "a"})
	q.Kick() // a is granted, its signal buffered
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	// Both cases are ready; whichever select takes, a leaves and b ends
	// up granted.
	err := q.Wait(ctx, a, nil)
	if err == nil {
		q.Settle(a, Gone)
	} else if !errors.Is(err, ErrCanceled) {
		t.Fatalf("Wait: %v", err)
	}
	if err := q.Wait(context.Background(), b, nil); err != nil {
		t.Fatalf("b was not granted after a left: %v", err)
	}
	if s := q.Stats(); s.Passed != 1 {
		t.Errorf("Stats.Passed %d, want 1", s.Passed)
	}
}

// BenchmarkWaitingMemory reports the heap bytes of one waiting pick (its
// ticket, channel and queue links; not the caller's goroutine).
func BenchmarkWaitingMemory(b *testing.B) {
	const n = 10000
	for i := 0; i < b.N; i++ {
		q := New(Limits{MaxWaiting: n, MaxPerBand: n})
		var m0, m1 runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m0)
		for j := 0; j < n; j++ {
			if _, err := q.Enqueue(testwait.Epoch, Item{Flow: "f", Tokens: 10, Deadline: testwait.Epoch.Add(time.Second)}); err != nil {
				b.Fatal(err)
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&m1)
		b.ReportMetric(float64(m1.HeapAlloc-m0.HeapAlloc)/n, "B/waiting")
		runtime.KeepAlive(q)
	}
}
