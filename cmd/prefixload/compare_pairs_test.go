package main

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/prefixroute/prefixroute/internal/sim"
)

// TestPairRuns: requests pair by id after the warm-up; a request only in
// one run, or before the warm-up, is left out; the errors split by
// whether the replay placed the request alike.
func TestPairRuns(t *testing.T) {
	ms := func(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }
	rec := func(id uint64, at time.Duration, inst int32, ttft, pred float64) sim.Record {
		return sim.Record{ID: id, Arrival: at, Instance: inst, TTFT: ms(ttft), PredictedMs: float32(pred)}
	}
	live := &sim.Result{Warmup: time.Second, Records: []sim.Record{
		rec(1, 0, 0, 100, 100),             // before the warm-up
		rec(2, 2*time.Second, 0, 100, 110), // same instance, TTFT equal: error 10 %
		rec(3, 2*time.Second, 1, 100, 200), // same instance, replay 105 ms: error 100 %
		rec(4, 2*time.Second, 2, 100, 150), // other instance, replay 300 ms: error 50 %
		rec(5, 2*time.Second, 3, 100, 0),   // other instance, no prediction
		rec(6, 2*time.Second, 0, 100, 100), // not in the replay
	}}
	replayed := &sim.Result{Warmup: time.Second, Records: []sim.Record{
		rec(5, 2*time.Second, 2, 100, 0),
		rec(4, 2*time.Second, 1, 300, 150),
		rec(3, 2*time.Second, 1, 105, 200),
		rec(2, 2*time.Second, 0, 100, 110),
		rec(1, 0, 0, 100, 100),
	}}
	got := pairRuns(live, replayed)
	want := pairStats{Both: 4, SameInstance: 2, TTFTClose: 3, P90Same: 1, P90Other: 0.5}
	if got.Both != want.Both || got.SameInstance != want.SameInstance || got.TTFTClose != want.TTFTClose ||
		math.Abs(got.P90Same-want.P90Same) > 1e-6 || math.Abs(got.P90Other-want.P90Other) > 1e-6 {
		t.Fatalf("pairRuns = %+v, want %+v", got, want)
	}
	var b strings.Builder
	writePairs(&b, "v", got)
	if row := "| v | 4 | 50.0 % | 75.0 % | 100.0 % | 50.0 % |\n"; b.String() != row {
		t.Errorf("row %q, want %q", b.String(), row)
	}
	b.Reset()
	writePairs(&b, "b", pairRuns(&sim.Result{}, &sim.Result{}))
	if row := "| b | 0 | — | — | — | — |\n"; b.String() != row {
		t.Errorf("empty row %q, want %q", b.String(), row)
	}
}
