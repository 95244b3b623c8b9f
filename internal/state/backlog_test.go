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
	for _, tc := range []struct {
		name    string
		off     bool
		waiting []uint32
		drain   int // index of a draining instance, -1 none
		tokens  uint64
		after   time.Duration
		want    float64
	}{
		{"off", true, []uint32{2, 5, 3}, -1, 0, 0, 0},
		{"least waiting", false, []uint32{2, 5, 3}, -1, 0, 0, 3},
		{"a draining instance does not count", false, []uint32{4, 0, 3}, 1, 0, 0, 4},
		// 30000 tokens at t0: 15000 tokens/s of 30000 → ρ 1/2 → 2.
		{"utilisation", false, []uint32{0, 0, 1}, -1, 30000, 0, 2},
		// 2 s later the rate is e^-1 of it.
		{"utilisation decays", false, []uint32{0, 0, 1}, -1, 30000, 2 * time.Second, 1 / (1 - 0.5*math.Exp(-1))},
		{"capped at ρ 0.95", false, []uint32{0, 0, 1}, -1, 1 << 30, 0, 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, p := newTestPool(t, Limits{BacklogWeight: !tc.off})
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
	for _, on := range []bool{false, true} {
		_, p := newTestPool(t, Limits{BacklogWeight: on, NoQueueLedger: true})
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
		// off: a 30 + 1.6 against b 10 + 17.6 → b. On: weight 2 → a 33.2, b 45.2.
		want := map[bool]string{false: "b", true: "a"}[on]
		if got := out.Snapshot.Instances[out.Decision.Instance].ID; got != want {
			t.Fatalf("BacklogWeight %v: chose %s, want %s (%+v)", on, got, want, out.Decision.Instances)
		}
	}
}

// TestBacklogWeightRefresh: the reading of the instances is reused for
// backlogRefresh, then read again; a reading from a later time is not used
// for an earlier one.
func TestBacklogWeightRefresh(t *testing.T) {
	_, p := newTestPool(t, Limits{BacklogWeight: true})
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

// TestBacklogWeightBusy: with BacklogBusy the utilisation is the larger of
// the work meter's and the share of instances whose latest report shows
// prefill work (QueueMs, or queued tokens without it), averaged in time.
func TestBacklogWeightBusy(t *testing.T) {
	busyRep := &Report{PrefillTokensPerSecond: 10000, HasQueueMs: true, QueueMs: 12}
	idleRep := &Report{PrefillTokensPerSecond: 10000, HasQueueMs: true}
	tokensRep := &Report{PrefillTokensPerSecond: 10000, QueuedPrefillTokens: 100} // no QueueMs: its tokens
	for _, tc := range []struct {
		name   string
		off    bool // BacklogBusy off
		reps   []*Report
		tokens uint64 // work picked at t0
		later  []bool // after, every instance reports busy (true) or idle
		after  time.Duration
		want   float64
	}{
		{"off: the meter alone", true, []*Report{busyRep, busyRep, busyRep, idleRep}, 0, nil, 0, 1},
		{"3 of 4 busy", false, []*Report{busyRep, busyRep, tokensRep, idleRep}, 0, nil, 0, 4},
		{"queued tokens count only without QueueMs", false, []*Report{tokensRep, {PrefillTokensPerSecond: 10000, HasQueueMs: true, QueuedPrefillTokens: 100}}, 0, nil, 0, 2},
		// 40000 tokens at t0: 20000 tokens/s of 40000, ρ 1/2 by the meter > 1/4 busy.
		{"the meter when it is larger", false, []*Report{busyRep, idleRep, idleRep, idleRep}, 40000, nil, 0, 2},
		// 3/4 at t0, then all idle for 2 s: 3/4 × e^-1.
		{"averaged over time", false, []*Report{busyRep, busyRep, busyRep, idleRep}, 0, []bool{false, false, false, false}, 2 * time.Second, 1 / (1 - 0.75*math.Exp(-1))},
		{"at most 20", false, []*Report{busyRep, busyRep}, 0, nil, 0, 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, p := newTestPool(t, Limits{BacklogWeight: true, BacklogBusy: !tc.off})
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

// TestUtilWeight: 1/(1 − ρ), or with externality 1 + ρ/(1 − ρ)², both at
// most 20; and through backlogWeight with BacklogExternality.
func TestUtilWeight(t *testing.T) {
	for _, tc := range []struct {
		rho  float64
		ext  bool
		want float64
	}{
		{0, false, 1}, {0, true, 1},
		{0.5, false, 2}, {0.5, true, 3},
		{0.75, false, 4}, {0.75, true, 13},
		{0.8, true, 20}, // 21, capped
		{0.95, false, 20}, {0.99, false, 20},
		{1, true, 20}, {3, false, 20}, {-1, true, 1},
	} {
		if got := utilWeight(tc.rho, tc.ext); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("utilWeight(%v, %v) = %v, want %v", tc.rho, tc.ext, got, tc.want)
		}
	}
	// 3 of 4 instances busy: ρ 3/4 → 13; 1 + 14 waiting is larger.
	for _, tc := range []struct {
		waiting uint32
		want    float64
	}{{0, 13}, {14, 15}} {
		_, p := newTestPool(t, Limits{BacklogWeight: true, BacklogBusy: true, BacklogExternality: true})
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
