package state

import (
	"math/rand/v2"
	"testing"

	"github.com/prefixroute/prefixroute/scheduler"
)

func TestLedgerQueueFrom(t *testing.T) {
	var l ledger
	for _, v := range []uint64{100, 200, 300} {
		l.add(v)
	}
	for _, tc := range []struct {
		name       string
		rep        Report
		tps        float64
		wantTokens uint64
		wantMs     float64
	}{
		{"nothing waiting or running: as reported", Report{QueuedPrefillTokens: 50, QueueMs: 5, HasQueueMs: true}, 0, 50, 5},
		{"whole prompts capped by the last two picks", Report{WaitingRequests: 2, QueuedPrefillTokens: 5000, QueueMs: 250, HasQueueMs: true, PrefillTokensPerSecond: 20000}, 0, 500, 25},
		{"waiting + running picks", Report{WaitingRequests: 1, RunningRequests: 2, QueuedPrefillTokens: 5000, QueueMs: 250, HasQueueMs: true, PrefillTokensPerSecond: 20000}, 0, 600, 30},
		{"an uncached report below the ledger stands", Report{WaitingRequests: 3, QueuedPrefillTokens: 400, QueueMs: 20, HasQueueMs: true, PrefillTokensPerSecond: 20000}, 0, 400, 20},
		{"more picks reported than the ledger holds: as reported", Report{WaitingRequests: 4, QueuedPrefillTokens: 9000, QueueMs: 450, HasQueueMs: true, PrefillTokensPerSecond: 20000}, 0, 9000, 450},
		{"no queue_ms: tokens capped only", Report{WaitingRequests: 1, QueuedPrefillTokens: 9000}, 10000, 300, 0},
		{"no reported throughput: the default", Report{WaitingRequests: 1, QueuedPrefillTokens: 9000, QueueMs: 900, HasQueueMs: true}, 10000, 300, 30},
		{"no throughput at all: ms as reported", Report{WaitingRequests: 1, QueuedPrefillTokens: 9000, QueueMs: 900, HasQueueMs: true}, 0, 300, 900},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tokens, ms := l.queueFrom(&tc.rep, tc.tps)
			if tokens != tc.wantTokens || ms != tc.wantMs {
				t.Fatalf("queueFrom = %d tokens, %v ms; want %d, %v", tokens, ms, tc.wantTokens, tc.wantMs)
			}
		})
	}
}

func TestLedgerRing(t *testing.T) {
	var l ledger
	for i := range scheduler.LedgerPicks + 44 {
		l.add(uint64(i))
	}
	got, ok := l.last(scheduler.LedgerPicks)
	want := uint64(0)
	for i := 44; i < scheduler.LedgerPicks+44; i++ {
		want += uint64(i)
	}
	if !ok || got != want {
		t.Fatalf("last(%d) = %d, %v; want %d", scheduler.LedgerPicks, got, ok, want)
	}
	if _, ok := l.last(scheduler.LedgerPicks + 1); ok {
		t.Fatal("last beyond the ring answered")
	}
	l.add(1 << 40)
	if got, _ := l.last(1); got != 1<<32-1 {
		t.Fatalf("a pick over 2^32 tokens recorded as %d", got)
	}
}

// TestPoolQueueLedger: after two picks onto a, a report counting both
// requests' whole prompts is capped at their uncached tokens; a report of
// three requests, more than the ledger holds picks of, stands.
func TestPoolQueueLedger(t *testing.T) {
	for _, waiting := range []uint32{2, 3} {
		_, p := newTestPool(t, Limits{})
		s := connect(t, p, t0, "d", "a", &Report{ReportsCacheEvents: true, PrefillTokensPerSecond: 10000, HasQueueMs: true,
			Stored: []uint64{1, 2, 3}, BlockSizeTokens: 16})
		rng := rand.New(rand.NewPCG(1, 2))
		var out Pick
		for range 2 {
			in := PickInput{Hashes: []uint64{1, 2, 3, 4}, PromptTokens: 64}
			if err := p.Pick(t0, &in, rng, &out); err != nil {
				t.Fatal(err)
			}
			if u := out.Decision.Instances[out.Decision.Instance].UncachedTokens; u != 16 {
				t.Fatalf("uncached %d, want 16", u)
			}
		}
		if err := s.Report(t0, &Report{ReportsCacheEvents: true, PrefillTokensPerSecond: 10000, BlockSizeTokens: 16,
			WaitingRequests: waiting, QueuedPrefillTokens: 128, QueueMs: 12.8, HasQueueMs: true}); err != nil {
			t.Fatal(err)
		}
		in := PickInput{Hashes: []uint64{1, 2, 3, 4}, PromptTokens: 64}
		if err := p.Pick(t0, &in, rng, &out); err != nil {
			t.Fatal(err)
		}
		want := 3.2 // 32 tokens at 10000 tokens/s
		if waiting == 3 {
			want = 12.8
		}
		if q := out.Decision.Instances[0].QueueMs; q != want {
			t.Fatalf("%d waiting: queue %v ms, want %v", waiting, q, want)
		}
	}
}
