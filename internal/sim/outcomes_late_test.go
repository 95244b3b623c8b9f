package sim_test

import (
	"math"
	"os"
	"slices"
	"testing"

	"github.com/prefixroute/prefixroute/internal/calib"
	"github.com/prefixroute/prefixroute/internal/sim"
	"github.com/prefixroute/prefixroute/internal/simout"
)

// TestOutcomesLateSamples replays a live run's route delays (8 gateway
// workers on the Mooncake trace, 2026-12-05: requests of one burst reach
// their instance out of order, so many outcomes are late by queueing the
// router did not foresee) on mooncake-slo-mismatch, seed 1. The fit must
// end where it ends without the delays (scale 1.11, C 9,371 tokens: the
// fleet's batch overhead and chunking are beyond the model) within 10 %
// (scale) and 15 % (C), and predict within the aims (median error ≤
// 15 %). Least squares with a symmetric clip went to scale 5.1, C 45,000
// tokens and a 164 % median error here.
func TestOutcomesLateSamples(t *testing.T) {
	sc, err := sim.LoadScenario("testdata/mooncake-slo-mismatch.yaml")
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open("testdata/mooncake-slo-mismatch-live-routes.csv")
	if err != nil {
		t.Fatal(err)
	}
	delays, err := simout.ReadRoutesCSV(f)
	_ = f.Close() // read-only, fully read
	if err != nil {
		t.Fatal(err)
	}
	fitOf := func(res *sim.Result) calib.Status {
		t.Helper()
		if len(res.Fits) != 1 {
			t.Fatalf("fits %+v, want one (main)", res.Fits)
		}
		return res.Fits[0].Status
	}
	clean, err := sim.Run(sc, "ours-outcomes", sim.RunOptions{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	res, err := sim.Run(sc, "ours-outcomes", sim.RunOptions{Seed: 1, RouteDelays: delays, LiveDraws: true})
	if err != nil {
		t.Fatal(err)
	}
	want, got := fitOf(clean), fitOf(res)
	if math.Abs(got.PrefillScale/want.PrefillScale-1) > 0.10 || math.Abs(got.DoublingContextTokens/want.DoublingContextTokens-1) > 0.15 {
		t.Errorf("fit with the live delays %+v, without %+v: want the scale within 10 %% and C within 15 %%", got, want)
	}
	var errs []float64
	for _, r := range res.Records {
		if act := float64(r.TTFT) / 1e6; r.Arrival >= res.Warmup && r.PredictedMs > 0 && act > 0 {
			errs = append(errs, math.Abs(float64(r.PredictedMs)-act)/act)
		}
	}
	slices.Sort(errs)
	if len(errs) < 1000 || errs[len(errs)/2] > 0.15 {
		t.Errorf("%d predictions, median |predicted − actual| / actual %.3f; want ≥ 1,000 and ≤ 0.15", len(errs), errs[len(errs)/2])
	}
}
