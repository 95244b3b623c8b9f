package calib

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/prefixroute/prefixroute/scheduler"
)

// lateSample is tr.sample without outliers, made late with probability
// late by a delay the router did not foresee: exponential, its mean the
// request's own prefill time (requests of one burst served out of order).
func (tr truth) lateSample(rng *rand.Rand, late float64) Sample {
	s := tr.sample(rng, 0)
	if rng.Float64() < late {
		s.ActualMs += rng.ExpFloat64() * tr.scale * scheduler.PrefillMs(s.Uncached, s.Cached, tr.c, s.TPS)
	}
	return s
}

// TestFitLateSamples: 30 % of the samples late by a one-sided delay (mean:
// their own prefill) leave the fit within 5 % of the truth's prefill scale
// and queue scale and 10 % of its doubling context (it ends 2–4 % high:
// ε/(1−ε)·LateClip), where least squares with a symmetric clip at 3 mean
// residuals drifted to a scale 27–40 % too high.
func TestFitLateSamples(t *testing.T) {
	for _, tc := range []struct {
		name string
		tr   truth
	}{
		{"prior right", truth{1, 17000, 1}},
		{"slower, shorter C", truth{1.3, 12000, 1}},
		{"faster, longer C", truth{0.7, 33000, 1}},
		{"C 8,000 (the live mismatch)", truth{1, 8000, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(29, 30))
			f := NewFitter(17000)
			for range 5000 {
				s := tc.tr.lateSample(rng, 0.3)
				f.Add(&s)
			}
			st := f.Status()
			if rel(st.PrefillScale, tc.tr.scale) > 0.05 || rel(st.DoublingContextTokens, tc.tr.c) > 0.10 || rel(st.QueueScale, tc.tr.queueScale) > 0.05 {
				t.Fatalf("fit %+v, want scale %v, C %v, queue %v", st, tc.tr.scale, tc.tr.c, tc.tr.queueScale)
			}
		})
	}
}

// TestFitWrongPrior: a deployment 2× slower or 2× faster than the prior
// (same C) is learned within 5 % (scale) and 10 % (C) in 2,000 samples,
// with or without 30 % late samples: the late clip, a fraction of the
// fit's own prediction, does not stop a prior that is too low from being
// corrected.
func TestFitWrongPrior(t *testing.T) {
	for _, scale := range []float64{0.5, 2} {
		for _, late := range []float64{0, 0.3} {
			tr := truth{scale, 17000, 1}
			rng := rand.New(rand.NewPCG(31, uint64(scale*10)))
			f := NewFitter(17000)
			for range 2000 {
				s := tr.lateSample(rng, late)
				f.Add(&s)
			}
			if st := f.Status(); rel(st.PrefillScale, scale) > 0.05 || rel(st.DoublingContextTokens, 17000) > 0.10 {
				t.Errorf("scale %v, late %v: fit %+v", scale, late, st)
			}
		}
	}
}

// TestFitOutliersBothWays: outliers 5× slower and 5× faster than their
// truth, up to 10 % of the samples each way or 20 % one way, leave the fit
// within 5 % (scale, queue) and 10 % (C) of the truth.
func TestFitOutliersBothWays(t *testing.T) {
	for _, tc := range []struct {
		name       string
		slow, fast float64
	}{
		{"3 % slow, 3 % fast", 0.03, 0.03},
		{"10 % slow, 10 % fast", 0.10, 0.10},
		{"20 % fast", 0, 0.20},
		{"20 % slow", 0.20, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := truth{1.3, 12000, 1}
			rng := rand.New(rand.NewPCG(33, 34))
			f := NewFitter(17000)
			for range 5000 {
				s := tr.sample(rng, 0)
				switch r := rng.Float64(); {
				case r < tc.slow:
					s.ActualMs *= 5
				case r < tc.slow+tc.fast:
					s.ActualMs /= 5
				}
				f.Add(&s)
			}
			if st := f.Status(); rel(st.PrefillScale, tr.scale) > 0.05 || rel(st.DoublingContextTokens, tr.c) > 0.10 || rel(st.QueueScale, 1) > 0.05 {
				t.Fatalf("fit %+v, want scale %v, C %v, queue 1", st, tr.scale, tr.c)
			}
		})
	}
}

func rel(got, want float64) float64 { return math.Abs(got-want) / want }

// TestRelResidualEdges: a sample's term of MeanAbsRelResidual at the edges
// of its denominator max(actual, pred, ResidualFloorMs).
func TestRelResidualEdges(t *testing.T) {
	for _, tc := range []struct {
		actual, pred, want float64
	}{
		{0, 0, 0},
		{5, 0, 0.5},     // both under the floor: /10 ms
		{0, 10, 1},      // a zero TTFT against the floor
		{10, 0, 1},      // a zero prediction: /actual, not /0
		{10.0001, 0, 1}, // just over the floor: still 1
		{1000, 0.001, 0.999999},
		{0.001, 1000, 0.999999},
		{100, 50, 0.5},
		{50, 100, 0.5}, // symmetric
		{100, 100, 0},
	} {
		if got := relResidual(tc.actual, tc.pred); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("relResidual(%v, %v) = %v, want %v", tc.actual, tc.pred, got, tc.want)
		}
	}
}

// TestMeanResidualNearZero: samples with a near-zero prediction (no new
// tokens, an empty queue) and a TTFT of 50 ms keep MeanAbsRelResidual
// within [0, 1]; before the floor each added 50/32 to it.
func TestMeanResidualNearZero(t *testing.T) {
	f := NewFitter(0)
	for range 200 {
		f.Add(&Sample{Uncached: 0, TPS: 10000, ActualMs: 50, QueueSeen: true})
	}
	if r := f.Status().MeanAbsRelResidual; !(r >= 0 && r <= 1) {
		t.Fatalf("MeanAbsRelResidual %v after 200 near-zero predictions, want in [0, 1]", r)
	}
}
