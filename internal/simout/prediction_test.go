package simout

import (
	"strings"
	"testing"
	"time"

	"github.com/prefixroute/prefixroute/internal/sim"
)

// TestPrediction: hand-made records give exact error percentiles, the
// slowest tenth's ratio, and the targets met and shed; the warm-up and the
// records without a prediction do not count.
func TestPrediction(t *testing.T) {
	res := &sim.Result{Variant: sim.Variant{Name: "v"}, Warmup: time.Second}
	// 20 requests after the warm-up: actual 100..2000 ms, predicted 90 % of
	// actual for the first 10 and 150 % for the last 10; targets 1000 ms.
	for i := 1; i <= 20; i++ {
		act := time.Duration(i*100) * time.Millisecond
		pred := 0.9 * float32(i*100)
		if i > 10 {
			pred = 1.5 * float32(i*100)
		}
		res.Records = append(res.Records, sim.Record{Arrival: 2 * time.Second, TTFT: act, PredictedMs: pred, TargetMs: 1000})
	}
	res.Records = append(res.Records,
		sim.Record{Arrival: 0, TTFT: time.Second, PredictedMs: 1, TargetMs: 1000},         // warm-up
		sim.Record{Arrival: 2 * time.Second, TTFT: 50 * time.Millisecond, TargetMs: 1000}, // no prediction (a baseline's)
	)
	res.Rejected = []sim.Record{{Arrival: 2 * time.Second, TargetMs: 1000}, {Arrival: 0, TargetMs: 1000}}
	p := predictionOf(res)
	want := Prediction{N: 20, MedianAbsRelErr: 0.1, P90AbsRelErr: 0.5, SlowestRatio: 1.5, WithTarget: 21, Met: 11, Shed: 1}
	near := func(a, b float64) bool { return a-b < 1e-6 && b-a < 1e-6 }
	if p.N != want.N || !near(p.MedianAbsRelErr, want.MedianAbsRelErr) || !near(p.P90AbsRelErr, want.P90AbsRelErr) ||
		!near(p.SlowestRatio, want.SlowestRatio) || p.WithTarget != want.WithTarget || p.Met != want.Met || p.Shed != want.Shed {
		t.Fatalf("prediction %+v, want %+v", p, want)
	}
	if a := p.Attainment(); !near(a, 11.0/21) {
		t.Errorf("attainment %v", a)
	}
	var b strings.Builder
	writePrediction(&b, []Summary{{Variant: "v", Prediction: p}, {Variant: "base", Baseline: true, Picker: "llmd"}})
	for _, s := range []string{"| v | 20 | 10.0% | 50.0% | 1.50 | 21 | 11 | 52.4% | 1 |", "| — | — | — | — | — | — | — | — |"} {
		if !strings.Contains(b.String(), s) {
			t.Errorf("table lacks %q:\n%s", s, b.String())
		}
	}
}
