package calib

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/prefixroute/prefixroute/scheduler"
)

// truth is a deployment's physics: prefill at scale × the prior's dense
// time with doubling context c, the queue at queueScale × what the router
// saw.
type truth struct{ scale, c, queueScale float64 }

// sample draws a request like the Mooncake excerpt's (up to 64k cached, up
// to 8k new tokens, 0–500 ms of queue) and its TTFT under tr, with 5 %
// noise and, with probability outliers, a 5× slower outlier.
func (tr truth) sample(rng *rand.Rand, outliers float64) Sample {
	s := Sample{Uncached: uint32(64 + rng.IntN(8192)), Cached: uint32(rng.IntN(65536)), TPS: 10000,
		QueueMs: 500 * rng.Float64(), QueueSeen: true}
	t := tr.scale*scheduler.PrefillMs(s.Uncached, s.Cached, tr.c, s.TPS) + tr.queueScale*s.QueueMs
	t *= 1 + 0.05*rng.NormFloat64()
	if rng.Float64() < outliers {
		t *= 5
	}
	s.ActualMs = max(t, 0)
	return s
}

// TestFitRecoversPhysics: from the prior (C 17,000, scale 1), 3,000
// samples of a deployment 30 % slower with C 12,000, with 5 % noise and
// 2 % outliers, give its figures within 5 % (scale, queue) and 10 % (C).
func TestFitRecoversPhysics(t *testing.T) {
	for _, tc := range []struct {
		name string
		tr   truth
	}{
		{"slower, shorter C", truth{1.3, 12000, 1}},
		{"faster, longer C, queue underestimated", truth{0.7, 33000, 1.5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(7, 29))
			f := NewFitter(17000)
			for range 3000 {
				s := tc.tr.sample(rng, 0.02)
				f.Add(&s)
			}
			st := f.Status()
			if rel(st.PrefillScale, tc.tr.scale) > 0.05 || rel(st.DoublingContextTokens, tc.tr.c) > 0.10 || rel(st.QueueScale, tc.tr.queueScale) > 0.05 {
				t.Fatalf("fit %+v, want scale %v, C %v, queue %v", st, tc.tr.scale, tc.tr.c, tc.tr.queueScale)
			}
			if st.Clipped == 0 || st.Accepted != 3000 {
				t.Errorf("accepted %d, clipped %d: the outliers should be clipped", st.Accepted, st.Clipped)
			}
			// Its predictions: median relative error under 10 % on fresh
			// requests without outliers, where the prior's is over 25 %.
			var fitErr, priorErr []float64
			prior := NewFitter(17000)
			for range 500 {
				s := tc.tr.sample(rng, 0)
				fitErr = append(fitErr, math.Abs(f.Predict(&s)-s.ActualMs)/s.ActualMs)
				priorErr = append(priorErr, math.Abs(prior.Predict(&s)-s.ActualMs)/s.ActualMs)
			}
			if m, mp := median(fitErr), median(priorErr); m > 0.10 || mp < 0.25 {
				t.Errorf("median relative error: fit %.3f, prior %.3f", m, mp)
			}
		})
	}
}

func median(v []float64) float64 {
	s := append([]float64(nil), v...)
	for i := range s { // insertion sort: small slices
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
	return s[len(s)/2]
}

// TestFitVersions: the prior until MinSamples accepted samples, then a
// version every PublishEvery; ignored samples count for nothing.
func TestFitVersions(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	f := NewFitter(17000)
	tr := truth{1, 17000, 1}
	bad := []Sample{
		{Uncached: 100, TPS: 10000, ActualMs: 10},                               // queue not seen
		{Uncached: 100, TPS: 0, ActualMs: 10, QueueSeen: true},                  // no throughput
		{Uncached: 100, TPS: 10000, ActualMs: math.NaN(), QueueSeen: true},      // NaN
		{Uncached: 100, TPS: 10000, ActualMs: 10, QueueMs: -1, QueueSeen: true}, // negative queue
	}
	for i := range bad {
		if f.Add(&bad[i]) {
			t.Fatalf("sample %+v accepted", bad[i])
		}
	}
	for n := 1; n <= MinSamples+2*PublishEvery; n++ {
		s := tr.sample(rng, 0)
		f.Add(&s)
		want := uint64(0)
		if n >= MinSamples {
			want = 1 + uint64(n-MinSamples)/PublishEvery
		}
		if c := f.Calibration(); c.Version != want || (want == 0) != (c.PrefillScale == 0) {
			t.Fatalf("after %d samples: calibration %+v, want version %d", n, c, want)
		}
	}
	if st := f.Status(); st.Ignored != uint64(len(bad)) || st.Accepted != MinSamples+2*PublishEvery {
		t.Fatalf("status %+v", st)
	}
}

// TestFitLimits: absurd samples drive the estimates to their limits, never
// beyond, never NaN; an unexcited queue term keeps its prior and a bounded
// covariance over 100,000 samples.
func TestFitLimits(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	slow := NewFitter(17000)
	for range 5000 {
		s := truth{1, 17000, 1}.sample(rng, 0)
		s.ActualMs *= 100
		slow.Add(&s)
	}
	if st := slow.Status(); st.PrefillScale != scheduler.MaxPrefillScale || st.QueueScale > MaxQueueScale {
		t.Fatalf("100× slower: %+v, want prefill scale at %v and queue scale <= %v", st, float64(scheduler.MaxPrefillScale), MaxQueueScale)
	}
	fast := NewFitter(17000)
	for range 5000 {
		s := truth{1, 17000, 1}.sample(rng, 0)
		s.ActualMs = 0
		fast.Add(&s)
	}
	if st := fast.Status(); st.PrefillScale < scheduler.MinPrefillScale || st.PrefillScale > 1.1*scheduler.MinPrefillScale ||
		st.QueueScale < MinQueueScale || st.QueueScale > 1.1*MinQueueScale ||
		!(st.DoublingContextTokens >= scheduler.MinDoublingContextTokens && st.DoublingContextTokens <= scheduler.MaxDoublingContextTokens) {
		t.Fatalf("0 ms: %+v, want the scales within 10 %% of their lower limits and C within its bounds", st)
	}
	idle := NewFitter(17000)
	for range 100000 {
		s := truth{1.2, 17000, 1}.sample(rng, 0)
		s.QueueMs = 0
		s.ActualMs = 1.2 * scheduler.PrefillMs(s.Uncached, s.Cached, 17000, s.TPS)
		idle.Add(&s)
	}
	st := idle.Status()
	for i := range 3 {
		if v := idle.p[i][i]; !(v >= 0 && v <= maxVar) {
			t.Fatalf("covariance diagonal %d = %v", i, v)
		}
	}
	if math.Abs(st.PrefillScale-1.2) > 1e-3 || st.QueueScale != 1 {
		t.Fatalf("idle queue: %+v, want prefill scale 1.2 and the queue's prior 1", st)
	}
}

// TestFitPriorOff: with the attention term off in the policy (C 0), the
// fit learns one from the samples.
func TestFitPriorOff(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	f := NewFitter(0)
	for range 3000 {
		s := truth{1, 17000, 1}.sample(rng, 0)
		f.Add(&s)
	}
	if st := f.Status(); math.Abs(st.DoublingContextTokens-17000)/17000 > 0.1 {
		t.Fatalf("fit %+v, want C about 17000", st)
	}
}
