package scheduler_test

import (
	"math"
	"testing"
	"time"

	"github.com/prefixroute/prefixroute/scheduler"
)

// TestUtilWeight: 1 + ρ/(1 − ρ)², at most 20, exact at the table's points;
// at and past ρ = 1 (and for NaN) the cap, below 0 the weight of ρ = 0.
func TestUtilWeight(t *testing.T) {
	for _, tc := range []struct {
		rho, want float64
	}{
		{0, 1}, {0.25, 1 + 0.25/0.5625}, {0.5, 3}, {0.75, 13},
		{0.78, 1 + 0.78/(0.22*0.22)}, // 17.115…, under the cap
		{0.8, 20},                    // 21, capped
		{0.95, 20}, {0.999999, 20}, {math.Nextafter(1, 0), 20},
		{1, 20}, {3, 20}, {math.Inf(1), 20}, {math.NaN(), 20},
		{-1, 1}, {math.Inf(-1), 1},
	} {
		if got := scheduler.UtilWeight(tc.rho); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("UtilWeight(%v) = %v, want %v", tc.rho, got, tc.want)
		}
	}
}

// TestBacklogWeightModel: 0 with no instance, else the larger of 1 + the
// fewest waiting and the utilisation term, ρ the larger of the picked rate
// over the throughput and the queue reading V/(V + S).
func TestBacklogWeightModel(t *testing.T) {
	// Three instances of 10000 tokens/s; picks of 2000 work tokens (200 ms)
	// at rate r picks/s.
	pool := func(picksPerSec, queueMs float64) scheduler.Backlog {
		return scheduler.Backlog{Found: true, Instances: 3, ThroughputTokensPerSecond: 3e4,
			PickedTokensPerSecond: 2000 * picksPerSec, PicksPerSecond: picksPerSec, QueueMs: queueMs}
	}
	w := func(rho float64) float64 { return 1 + rho/((1-rho)*(1-rho)) }
	for _, tc := range []struct {
		name string
		b    scheduler.Backlog
		rho  float64
		want float64
	}{
		{"no instance", scheduler.Backlog{LeastWaiting: 9, PickedTokensPerSecond: 1e9, QueueMs: 1e9}, 0, 0},
		{"idle", scheduler.Backlog{Found: true, Instances: 1, ThroughputTokensPerSecond: 1e4}, 0, 1},
		{"least waiting", scheduler.Backlog{Found: true, LeastWaiting: 4, ThroughputTokensPerSecond: 1e4}, 0, 5},
		{"picked rate", scheduler.Backlog{Found: true, PickedTokensPerSecond: 5000, ThroughputTokensPerSecond: 1e4}, 0.5, 3},
		// Issue 29: a nearly idle pool (0.3 picks/s, ρ_rate 0.02) whose three
		// instances report 5, 30 and 60 ms of queue: V = 31.67 ms against
		// S = 200 ms, ρ = 0.137, weight 1.2 (was 20: each counted busy).
		{"issue 29: nearly idle, 5-60 ms queues", pool(0.3, (5+30+60)/3.0), 95.0 / 3 / (95.0/3 + 200), w(95.0 / 3 / (95.0/3 + 200))},
		{"queue one service: ρ 1/2", pool(0.3, 200), 0.5, 3},
		{"queue 3 services: ρ 3/4", pool(0.3, 600), 0.75, 13},
		{"picked rate larger than the queue", pool(11.25, 200), 0.75, 13},
		{"queue of a saturated pool: the cap", pool(0.3, 1e5), 1e5 / (1e5 + 200), 20},
		{"no picks: the rate alone, queue unread", scheduler.Backlog{Found: true, Instances: 3, ThroughputTokensPerSecond: 3e4, QueueMs: 600}, 0, 1},
		{"waiting beats utilisation", scheduler.Backlog{Found: true, LeastWaiting: 14, Instances: 3, ThroughputTokensPerSecond: 3e4,
			PickedTokensPerSecond: 600, PicksPerSecond: 0.3, QueueMs: 600}, 0.75, 15},
		{"overloaded: the cap", scheduler.Backlog{Found: true, PickedTokensPerSecond: 3e4, ThroughputTokensPerSecond: 1e4}, 3, 20},
		{"waiting beyond the cap", scheduler.Backlog{Found: true, LeastWaiting: 40, PickedTokensPerSecond: 3e4, ThroughputTokensPerSecond: 1e4}, 3, 41},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := scheduler.Utilisation(tc.b); math.Abs(got-tc.rho) > 1e-12 {
				t.Errorf("Utilisation = %v, want %v", got, tc.rho)
			}
			if got := scheduler.BacklogWeight(tc.b); math.Abs(got-tc.want) > 1e-12 {
				t.Errorf("BacklogWeight = %v, want %v", got, tc.want)
			}
		})
	}
	// The case in numbers: near 1.
	if got := scheduler.BacklogWeight(pool(0.3, 95.0/3)); got < 1 || got > 1.25 {
		t.Errorf("nearly idle pool: weight %v, want near 1", got)
	}
}

// TestServiceMs: the mean pick's work at the mean throughput; 0 without
// picks, throughput or instances.
func TestServiceMs(t *testing.T) {
	for _, tc := range []struct {
		b    scheduler.Backlog
		want float64
	}{
		{scheduler.Backlog{Instances: 3, ThroughputTokensPerSecond: 3e4, PickedTokensPerSecond: 4000, PicksPerSecond: 2}, 200},
		{scheduler.Backlog{Instances: 1, ThroughputTokensPerSecond: 40000, PickedTokensPerSecond: 6119, PicksPerSecond: 1}, 152.975},
		{scheduler.Backlog{Instances: 3, ThroughputTokensPerSecond: 3e4, PickedTokensPerSecond: 4000}, 0},
		{scheduler.Backlog{Instances: 3, PickedTokensPerSecond: 4000, PicksPerSecond: 2}, 0},
		{scheduler.Backlog{ThroughputTokensPerSecond: 3e4, PickedTokensPerSecond: 4000, PicksPerSecond: 2}, 0},
	} {
		if got := scheduler.ServiceMs(tc.b); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("ServiceMs(%+v) = %v, want %v", tc.b, got, tc.want)
		}
	}
}

// TestDecayedRate: the rate decays by e^(−dt/2s); a reading before the
// rate's time reads it unchanged; a pick of n tokens adds n/2 tokens/s.
func TestDecayedRate(t *testing.T) {
	if scheduler.UtilisationTau != 2*time.Second {
		t.Fatalf("UtilisationTau %v, want 2s (the table below)", scheduler.UtilisationTau)
	}
	for _, tc := range []struct {
		rate   float64
		dt     time.Duration
		tokens uint64
		want   float64
	}{
		{1000, 0, 0, 1000},
		{1000, -time.Second, 0, 1000},
		{1000, 2 * time.Second, 0, 1000 * math.Exp(-1)},
		{1000, time.Second, 0, 1000 * math.Exp(-0.5)},
		{0, time.Hour, 30000, 15000},
		{1000, 2 * time.Second, 4000, 1000*math.Exp(-1) + 2000},
		{1000, -time.Second, 4000, 3000},
	} {
		got := scheduler.AddedRate(tc.rate, tc.dt, tc.tokens)
		if tc.tokens == 0 {
			got = scheduler.DecayedRate(tc.rate, tc.dt)
		}
		if math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("rate %v, dt %v, +%d tokens: %v, want %v", tc.rate, tc.dt, tc.tokens, got, tc.want)
		}
	}
}

// TestTimeAverage: the average moves towards the sample by 1 − e^(−dt/2s);
// a sample at or before the previous reading weighs nothing.
func TestTimeAverage(t *testing.T) {
	for _, tc := range []struct {
		prev, sample float64
		dt           time.Duration
		want         float64
	}{
		{0.75, 0, 2 * time.Second, 0.75 * math.Exp(-1)},
		{0.25, 1, 200 * time.Millisecond, 0.25 + 0.75*(1-math.Exp(-0.1))},
		{0.5, 1, 0, 0.5},
		{0.5, 1, -time.Second, 0.5},
		{0.5, 0.5, time.Minute, 0.5},
		{0, 1, time.Hour, 1},
	} {
		if got := scheduler.TimeAverage(tc.prev, tc.sample, tc.dt); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("TimeAverage(%v, %v, %v) = %v, want %v", tc.prev, tc.sample, tc.dt, got, tc.want)
		}
	}
}

// TestReportedQueueMs: queue_ms when reported, else the queued tokens at
// the throughput (0 without one).
func TestReportedQueueMs(t *testing.T) {
	for _, tc := range []struct {
		ms     float64
		hasMs  bool
		tokens uint64
		tps    float64
		want   float64
	}{
		{12, true, 0, 1000, 12}, {0, true, 100, 1000, 0}, {0, false, 100, 1000, 100}, {0, false, 0, 1000, 0},
		{5, false, 0, 1000, 0}, {0, false, 100, 0, 0}, {0, false, 500, 10000, 50},
	} {
		if got := scheduler.ReportedQueueMs(tc.ms, tc.hasMs, tc.tokens, tc.tps); got != tc.want {
			t.Errorf("ReportedQueueMs(%v, %v, %d, %v) = %v, want %v", tc.ms, tc.hasMs, tc.tokens, tc.tps, got, tc.want)
		}
	}
}
