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
// over the throughput and the busy share.
func TestBacklogWeightModel(t *testing.T) {
	for _, tc := range []struct {
		name string
		b    scheduler.Backlog
		rho  float64
		want float64
	}{
		{"no instance", scheduler.Backlog{LeastWaiting: 9, PickedTokensPerSecond: 1e9, Busy: 1}, 1, 0},
		{"idle", scheduler.Backlog{Found: true, ThroughputTokensPerSecond: 1e4}, 0, 1},
		{"least waiting", scheduler.Backlog{Found: true, LeastWaiting: 4, ThroughputTokensPerSecond: 1e4}, 0, 5},
		{"picked rate", scheduler.Backlog{Found: true, PickedTokensPerSecond: 5000, ThroughputTokensPerSecond: 1e4}, 0.5, 3},
		{"busy share larger", scheduler.Backlog{Found: true, PickedTokensPerSecond: 2500, ThroughputTokensPerSecond: 1e4, Busy: 0.75}, 0.75, 13},
		{"picked rate larger", scheduler.Backlog{Found: true, PickedTokensPerSecond: 7500, ThroughputTokensPerSecond: 1e4, Busy: 0.25}, 0.75, 13},
		{"waiting beats utilisation", scheduler.Backlog{Found: true, LeastWaiting: 14, Busy: 0.75}, 0.75, 15},
		{"no throughput: the busy share alone", scheduler.Backlog{Found: true, PickedTokensPerSecond: 1e6, Busy: 0.5}, 0.5, 3},
		{"overloaded: the cap", scheduler.Backlog{Found: true, PickedTokensPerSecond: 3e4, ThroughputTokensPerSecond: 1e4}, 3, 20},
		{"waiting beyond the cap", scheduler.Backlog{Found: true, LeastWaiting: 40, Busy: 1}, 1, 41},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := scheduler.Utilisation(tc.b); got != tc.rho {
				t.Errorf("Utilisation = %v, want %v", got, tc.rho)
			}
			if got := scheduler.BacklogWeight(tc.b); math.Abs(got-tc.want) > 1e-12 {
				t.Errorf("BacklogWeight = %v, want %v", got, tc.want)
			}
		})
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

// TestBusyAverage: the average moves towards the sample by 1 − e^(−dt/2s);
// a sample at or before the previous reading weighs nothing.
func TestBusyAverage(t *testing.T) {
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
		if got := scheduler.BusyAverage(tc.prev, tc.sample, tc.dt); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("BusyAverage(%v, %v, %v) = %v, want %v", tc.prev, tc.sample, tc.dt, got, tc.want)
		}
	}
}

// TestReportsBusy: queue_ms when reported, else the queued tokens.
func TestReportsBusy(t *testing.T) {
	for _, tc := range []struct {
		ms     float64
		hasMs  bool
		tokens uint64
		want   bool
	}{
		{12, true, 0, true}, {0, true, 100, false}, {0, false, 100, true}, {0, false, 0, false}, {5, false, 0, false},
	} {
		if got := scheduler.ReportsBusy(tc.ms, tc.hasMs, tc.tokens); got != tc.want {
			t.Errorf("ReportsBusy(%v, %v, %d) = %v, want %v", tc.ms, tc.hasMs, tc.tokens, got, tc.want)
		}
	}
}
