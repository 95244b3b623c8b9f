package simout

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/prefixroute/prefixroute/internal/sim"
)

// Prediction compares the router's predicted TTFT of each choice (the
// decision's predicted_ttft_ms) with the TTFT that followed, over the
// served requests after the warm-up, and counts the TTFT targets met. A
// plain value.
type Prediction struct {
	// N counts the requests with a prediction (0 for baselines).
	N int
	// MedianAbsRelErr and P90AbsRelErr are percentiles of
	// |predicted − actual| / actual; SlowestRatio is the median of
	// predicted / actual over the slowest 10 % of those requests (by
	// actual TTFT).
	MedianAbsRelErr, P90AbsRelErr, SlowestRatio float64
	// WithTarget counts the served requests that carried a TTFT target,
	// Met those whose TTFT was at or under it; Shed the requests refused
	// (the run's rejected after the warm-up with a target).
	WithTarget, Met, Shed int
}

// Attainment is Met / WithTarget, 0 without targets.
func (p *Prediction) Attainment() float64 {
	if p.WithTarget == 0 {
		return 0
	}
	return float64(p.Met) / float64(p.WithTarget)
}

// PredictionError is r's |predicted − actual| / actual TTFT, and false
// when r has no prediction (a baseline's pick) or no TTFT.
func PredictionError(r *sim.Record) (float64, bool) {
	act := float64(r.TTFT) / 1e6
	if !(r.PredictedMs > 0) || !(act > 0) {
		return 0, false
	}
	return math.Abs(float64(r.PredictedMs)-act) / act, true
}

// predictionOf computes res's Prediction.
func predictionOf(res *sim.Result) Prediction {
	var p Prediction
	type pa struct{ pred, act float64 }
	var xs []pa
	for i := range res.Records {
		r := &res.Records[i]
		if r.Arrival < res.Warmup {
			continue
		}
		act := float64(r.TTFT) / 1e6
		if r.TargetMs > 0 {
			p.WithTarget++
			if act <= float64(r.TargetMs) {
				p.Met++
			}
		}
		if _, ok := PredictionError(r); ok {
			xs = append(xs, pa{float64(r.PredictedMs), act})
		}
	}
	for i := range res.Rejected {
		if r := &res.Rejected[i]; r.Arrival >= res.Warmup && r.TargetMs > 0 {
			p.Shed++
		}
	}
	p.N = len(xs)
	if p.N == 0 {
		return p
	}
	errs := make([]float64, len(xs))
	for i, x := range xs {
		errs[i] = math.Abs(x.pred-x.act) / x.act
	}
	slices.Sort(errs)
	p.MedianAbsRelErr, p.P90AbsRelErr = sim.Percentile(errs, 0.5), sim.Percentile(errs, 0.9)
	slices.SortFunc(xs, func(a, b pa) int { return cmpF(a.act, b.act) })
	slow := xs[len(xs)-max(1, len(xs)/10):]
	ratios := make([]float64, len(slow))
	for i, x := range slow {
		ratios[i] = x.pred / x.act
	}
	slices.Sort(ratios)
	p.SlowestRatio = sim.Percentile(ratios, 0.5)
	return p
}

func cmpF(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// writePrediction adds the table of predicted against actual TTFT and of
// target attainment, when a variant has either.
func writePrediction(b *strings.Builder, sums []Summary) {
	if !slices.ContainsFunc(sums, func(s Summary) bool { return s.Prediction.N > 0 || s.Prediction.WithTarget > 0 }) {
		return
	}
	b.WriteString("\nPredicted against actual TTFT (router variants; |predicted − actual| / actual) and TTFT targets:\n\n")
	b.WriteString("| variant | predicted requests | median error | p90 error | slowest 10 %: median predicted/actual | with target | met | attainment | shed |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for i := range sums {
		s, p := &sums[i], &sums[i].Prediction
		pred := "— | — | — | —"
		if p.N > 0 {
			pred = fmt.Sprintf("%d | %.1f%% | %.1f%% | %.2f", p.N, 100*p.MedianAbsRelErr, 100*p.P90AbsRelErr, p.SlowestRatio)
		}
		att := "— | — | — | —"
		if p.WithTarget > 0 || p.Shed > 0 {
			att = fmt.Sprintf("%d | %d | %.1f%% | %d", p.WithTarget, p.Met, 100*p.Attainment(), p.Shed)
		}
		fmt.Fprintf(b, "| %s | %s | %s |\n", s.Label(), pred, att)
	}
}
