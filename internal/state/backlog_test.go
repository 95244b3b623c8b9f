package state

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/prefixroute/prefixroute/scheduler"
)

func TestBacklogWeight(t *testing.T) {
	rep := func(waiting uint32, draining bool) *Report {
		return &Report{WaitingRequests: waiting, Draining: draining, PrefillTokensPerSecond: 10000, HasQueueMs: true}
	}
	ext := func(rho float64) float64 { return 1 + rho/((1-rho)*(1-rho)) }
	for _, tc := range []struct {
		name    string
		waiting []uint32
		drain   int // index of a draining instance, -1 none
		tokens  uint64
		after   time.Duration
		want    float64
	}{
		{"no instance qualifies: the model's cost", []uint32{2}, 0, 0, 0, 0},
		{"least waiting", []uint32{2, 5, 3}, -1, 0, 0, 3},
		{"a draining instance does not count", []uint32{4, 0, 3}, 1, 0, 0, 4},
		// 30000 tokens at t0: 15000 tokens/s of 30000 → ρ 1/2 → 1 + 0.5/0.25.
		{"utilisation", []uint32{0, 0, 1}, -1, 30000, 0, 3},
		// 2 s later the rate is e^-1 of it.
		{"utilisation decays", []uint32{0, 0, 1}, -1, 30000, 2 * time.Second, ext(0.5 * math.Exp(-1))},
		{"capped", []uint32{0, 0, 1}, -1, 1 << 30, 0, 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, p := newTestPool(t, Limits{})
			for i, w := range tc.waiting {
				connect(t, p, t0, "d", string(rune('a'+i)), rep(w, i == tc.drain))
			}
			if tc.tokens > 0 {
				p.work.add(t0, tc.tokens)
			}
			p.mu.RLock()
			got := p.backlogWeight(t0.Add(tc.after))
			p.mu.RUnlock()
			if math.Abs(got-tc.want) > 1e-12 {
				t.Fatalf("backlogWeight = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestBacklogWeightPick: with every instance backlogged a pick weighs the
// prefill term, so the holder of the prefix wins against a shorter queue
// that the model's cost prefers.
func TestBacklogWeightPick(t *testing.T) {
	{
		_, p := newTestPool(t, Limits{})
		cfg := DefaultConfig()
		cfg.Policy.Strategy = scheduler.Argmin
		p.SetConfig(cfg)
		// a holds the 10 blocks (160 tokens, 16 ms) and has 20 ms more queue.
		connect(t, p, t0, "d", "a", &Report{ReportsCacheEvents: true, PrefillTokensPerSecond: 10000, BlockSizeTokens: 16,
			WaitingRequests: 3, QueueMs: 30, HasQueueMs: true, Stored: []uint64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}})
		connect(t, p, t0, "d", "b", &Report{ReportsCacheEvents: true, PrefillTokensPerSecond: 10000, BlockSizeTokens: 16,
			WaitingRequests: 1, QueueMs: 10, HasQueueMs: true})
		var out Pick
		in := PickInput{Hashes: []uint64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, PromptTokens: 176}
		if err := p.Pick(t0, &in, rand.New(rand.NewPCG(1, 1)), &out); err != nil {
			t.Fatal(err)
		}
		// The model's cost (weight 1): a 30 + 1.6 against b 10 + 17.6 → b. Both
		// report queued work, so ρ is 1 by the busy share: weight 20 → a
		// 30 + 32 = 62, b 10 + 352 = 362. (No pick is in the ledgers yet:
		// the reported queues stand.)
		if out.prefillWeight != 20 {
			t.Fatalf("prefill weight %v, want 20", out.prefillWeight)
		}
		if a, b := out.Decision.Instances[0].CostMs, out.Decision.Instances[1].CostMs; math.Abs(a-62) > 1e-9 || math.Abs(b-362) > 1e-9 {
			t.Fatalf("costs a %v, b %v; want 62, 362", a, b)
		}
		if got := out.Snapshot.Instances[out.Decision.Instance].ID; got != "a" {
			t.Fatalf("chose %s, want a (%+v)", got, out.Decision.Instances)
		}
	}
}

// TestBacklogWeightRefresh: the reading of the instances is reused for
// backlogRefresh, then read again; a reading from a later time is not used
// for an earlier one.
func TestBacklogWeightRefresh(t *testing.T) {
	_, p := newTestPool(t, Limits{})
	s := connect(t, p, t0, "d", "a", &Report{Seq: 1, WaitingRequests: 4, PrefillTokensPerSecond: 10000, HasQueueMs: true})
	weight := func(at time.Time) float64 {
		p.mu.RLock()
		defer p.mu.RUnlock()
		return p.backlogWeight(at)
	}
	if got := weight(t0); got != 5 {
		t.Fatalf("at t0: %v, want 5 (1 + 4 waiting)", got)
	}
	if err := s.Report(t0, &Report{Seq: 2, WaitingRequests: 1, PrefillTokensPerSecond: 10000, HasQueueMs: true}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		at   time.Duration
		want float64
	}{
		{backlogRefresh - time.Nanosecond, 5}, // the reading of t0, reused
		{backlogRefresh, 2},                   // read again: 1 + 1 waiting
		{0, 2},                                // t0 is before that reading: read again
	} {
		if got := weight(t0.Add(tc.at)); got != tc.want {
			t.Errorf("at t0+%v: %v, want %v", tc.at, got, tc.want)
		}
	}
}

// TestBacklogWeightBusy: the utilisation is the larger of the work meter's
// and the share of instances whose latest report shows prefill work
// (QueueMs, or queued tokens without it), averaged in time.
func TestBacklogWeightBusy(t *testing.T) {
	ext := func(rho float64) float64 { return 1 + rho/((1-rho)*(1-rho)) }
	busyRep := &Report{PrefillTokensPerSecond: 10000, HasQueueMs: true, QueueMs: 12}
	idleRep := &Report{PrefillTokensPerSecond: 10000, HasQueueMs: true}
	tokensRep := &Report{PrefillTokensPerSecond: 10000, QueuedPrefillTokens: 100} // no QueueMs: its tokens
	for _, tc := range []struct {
		name   string
		reps   []*Report
		tokens uint64 // work picked at t0
		later  []bool // after, every instance reports busy (true) or idle
		after  time.Duration
		want   float64
	}{
		{"none busy: the meter alone", []*Report{idleRep, idleRep}, 0, nil, 0, 1},
		{"3 of 4 busy", []*Report{busyRep, busyRep, tokensRep, idleRep}, 0, nil, 0, 13},
		{"queued tokens count only without QueueMs", []*Report{tokensRep, {PrefillTokensPerSecond: 10000, HasQueueMs: true, QueuedPrefillTokens: 100}}, 0, nil, 0, 3},
		// 40000 tokens at t0: 20000 tokens/s of 40000, ρ 1/2 by the meter > 1/4 busy.
		{"the meter when it is larger", []*Report{busyRep, idleRep, idleRep, idleRep}, 40000, nil, 0, 3},
		// 3/4 at t0, then all idle for 2 s: 3/4 × e^-1.
		{"averaged over time", []*Report{busyRep, busyRep, busyRep, idleRep}, 0, []bool{false, false, false, false}, 2 * time.Second, ext(0.75 * math.Exp(-1))},
		// 1/4 at t0, then all busy 200 ms later: 1/4 + 3/4 × (1 − e^-0.1).
		{"rising share", []*Report{busyRep, idleRep, idleRep, idleRep}, 0, []bool{true, true, true, true}, 200 * time.Millisecond, ext(0.25 + 0.75*(1-math.Exp(-0.1)))},
		{"at most 20", []*Report{busyRep, busyRep}, 0, nil, 0, 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, p := newTestPool(t, Limits{})
			var ss []*Session
			for i, r := range tc.reps {
				rep := *r
				rep.Seq = 1
				ss = append(ss, connect(t, p, t0, "d", string(rune('a'+i)), &rep))
			}
			if tc.tokens > 0 {
				p.work.add(t0, tc.tokens)
			}
			weight := func(at time.Time) float64 {
				p.mu.RLock()
				defer p.mu.RUnlock()
				return p.backlogWeight(at)
			}
			got := weight(t0)
			if tc.later != nil {
				at := t0.Add(tc.after)
				for i, busy := range tc.later {
					rep := *idleRep
					if busy {
						rep = *busyRep
					}
					rep.Seq = 2
					if err := ss[i].Report(at, &rep); err != nil {
						t.Fatal(err)
					}
				}
				got = weight(at)
			}
			if math.Abs(got-tc.want) > 1e-12 {
				t.Fatalf("backlogWeight = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestBacklogWeightLeastOrUtil: the weight is the larger of 1 + the fewest
// waiting requests and the utilisation term.
func TestBacklogWeightLeastOrUtil(t *testing.T) {
	// 3 of 4 instances busy: ρ 3/4 → 13; 1 + 14 waiting is larger.
	for _, tc := range []struct {
		waiting uint32
		want    float64
	}{{0, 13}, {14, 15}} {
		_, p := newTestPool(t, Limits{})
		for i, q := range []float64{5, 5, 5, 0} {
			connect(t, p, t0, "d", string(rune('a'+i)), &Report{Seq: 1, PrefillTokensPerSecond: 10000, HasQueueMs: true,
				QueueMs: q, WaitingRequests: tc.waiting})
		}
		p.mu.RLock()
		got := p.backlogWeight(t0)
		p.mu.RUnlock()
		if got != tc.want {
			t.Errorf("%d waiting: backlogWeight = %v, want %v", tc.waiting, got, tc.want)
		}
	}
}
