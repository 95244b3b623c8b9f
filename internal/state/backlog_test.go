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
		cfg.Policy.DoublingContextTokens = 0 // the linear model: round figures
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
		// The model's cost (weight 1): a 30 + 1.6 against b 10 + 17.6 → b.
		// Every instance has a request waiting: weight 1 + 1 (no pick yet,
		// so the reported queues are not read as utilisation) → a 30 + 3.2,
		// b 10 + 35.2. (No pick is in the ledgers yet: the reported queues
		// stand.)
		if out.prefillWeight != 2 {
			t.Fatalf("prefill weight %v, want 2", out.prefillWeight)
		}
		if a, b := out.Decision.Instances[0].CostMs, out.Decision.Instances[1].CostMs; math.Abs(a-33.2) > 1e-9 || math.Abs(b-45.2) > 1e-9 {
			t.Fatalf("costs a %v, b %v; want 33.2, 45.2", a, b)
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

// TestBacklogWeightQueue: the utilisation is the larger of the work
// meter's and the mean reported queue V read against the mean pick's
// prefill S (V/(V + S)), V averaged in time; without picks the queue is not
// read.
func TestBacklogWeightQueue(t *testing.T) {
	ext := func(rho float64) float64 { return 1 + rho/((1-rho)*(1-rho)) }
	ms := func(q float64) *Report { return &Report{PrefillTokensPerSecond: 10000, HasQueueMs: true, QueueMs: q} }
	tokensRep := &Report{PrefillTokensPerSecond: 10000, QueuedPrefillTokens: 2000} // no QueueMs: its tokens, 200 ms
	for _, tc := range []struct {
		name   string
		reps   []*Report
		tokens uint64    // one pick of this work at t0 (0: none)
		later  []float64 // after, every instance reports this queue_ms
		after  time.Duration
		want   float64
	}{
		{"idle", []*Report{ms(0), ms(0)}, 2000, nil, 0, ext(1000.0 / 20000)},
		// Issue 29: a nearly idle pool whose instances report 5, 30 and 60 ms
		// of queue; one pick of 2000 tokens, S = 200 ms: ρ = 31.7/231.7 = 0.14,
		// weight 1.2 (was 20, the cap: every instance counted busy).
		{"issue 29: nearly idle, 5-60 ms of queue", []*Report{ms(5), ms(30), ms(60)}, 2000, nil, 0, ext(95.0 / 3 / (95.0/3 + 200))},
		{"no picks: the queue unread", []*Report{ms(5), ms(30), ms(60)}, 0, nil, 0, 1},
		{"queued tokens without QueueMs", []*Report{tokensRep, tokensRep}, 2000, nil, 0, 3},
		{"queue three picks long: ρ 3/4", []*Report{ms(600), ms(600), ms(600)}, 2000, nil, 0, 13},
		// One pick of 40000 tokens on 4 instances: 20000 tokens/s of 40000,
		// ρ 1/2 by the meter; S = 4 s against 12 ms of queue.
		{"the meter when it is larger", []*Report{ms(12), ms(12), ms(12), ms(12)}, 40000, nil, 0, 3},
		// V 600 ms at t0, then all idle 2 s later: 600·e^-1 against S 200 ms.
		{"averaged over time", []*Report{ms(600), ms(600), ms(600)}, 2000, []float64{0, 0, 0}, 2 * time.Second,
			ext(max(600*math.Exp(-1)/(600*math.Exp(-1)+200), 1000*math.Exp(-1)/30000))},
		{"at most 20", []*Report{ms(1e5), ms(1e5)}, 2000, nil, 0, 20},
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
				p.mu.Lock()
				p.work.add(t0, tc.tokens)
				p.mu.Unlock()
			}
			weight := func(at time.Time) float64 {
				p.mu.RLock()
				defer p.mu.RUnlock()
				return p.backlogWeight(at)
			}
			got := weight(t0)
			if tc.later != nil {
				at := t0.Add(tc.after)
				for i, q := range tc.later {
					rep := *ms(q)
					rep.Seq = 2
					if err := ss[i].Report(at, &rep); err != nil {
						t.Fatal(err)
					}
				}
				got = weight(at)
			}
			if math.Abs(got-tc.want) > 1e-9 {
				t.Fatalf("backlogWeight = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestBacklogWeightLeastOrUtil: the weight is the larger of 1 + the fewest
// waiting requests and the utilisation term.
func TestBacklogWeightLeastOrUtil(t *testing.T) {
	// 600 ms of queue against picks of 200 ms: ρ 3/4 → 13; 1 + 14 waiting
	// is larger.
	for _, tc := range []struct {
		waiting uint32
		want    float64
	}{{0, 13}, {14, 15}} {
		_, p := newTestPool(t, Limits{})
		for i := range 4 {
			connect(t, p, t0, "d", string(rune('a'+i)), &Report{Seq: 1, PrefillTokensPerSecond: 10000, HasQueueMs: true,
				QueueMs: 600, WaitingRequests: tc.waiting})
		}
		p.mu.Lock()
		p.work.add(t0, 2000)
		p.mu.Unlock()
		p.mu.RLock()
		got := p.backlogWeight(t0)
		p.mu.RUnlock()
		if math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("%d waiting: backlogWeight = %v, want %v", tc.waiting, got, tc.want)
		}
	}
}
