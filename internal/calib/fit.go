// Package calib learns each deployment's prefill model from what requests
// really took: every outcome with a time to first token, matched with the
// pick that predicted it, is one sample of
//
//	actual − batch_wait ≈ θ1·D + θ2·A + θ3·Q
//
// where D = u·1000/tps is the request's dense prefill in ms at the
// throughput the pick used, A = u·(c + u/2)/Cref·1000/tps its attention
// term in ms at the reference doubling context Cref, and Q the queue ahead
// that the router saw, in ms. The prior (the policy's model) is θ = (1,
// Cref/C, 1). A Fitter solves it by recursive least squares with
// forgetting, on rows divided by the prior's prediction (so that every
// request weighs by its relative error, as the aims count it),
// with an asymmetric Huber loss (each residual clipped at 5 % of the
// fit's prediction above it, 10 % below, the sample weighed by its clip
// in the covariance too: robust to outliers and to requests late by
// queueing the router did not see), the covariance bounded (no wind-up
// when a term is not excited) and the estimates clamped to limits. It reads as a
// scheduler.Calibration (prefill scale θ1 and doubling context
// θ1·Cref/θ2) and a queue correction θ3.
package calib

import (
	"math"

	"github.com/prefixroute/prefixroute/scheduler"
)

// The fitter's constants (docs/model.md).
const (
	// MinSamples is how many accepted samples a deployment needs before
	// its fit is used: until then, Calibration reports Version 0 (the
	// policy's prior).
	MinSamples = 64
	// PublishEvery is how many accepted samples separate two versions of
	// a fit once MinSamples is reached.
	PublishEvery = 32
	// Forgetting is the RLS forgetting factor: a sample's weight halves
	// after about 350 newer ones (memory ~ 1/(1−λ) = 500 samples).
	Forgetting = 0.998
	// LateClip and EarlyClip bound a sample's residual, as fractions of
	// the fit's prediction, above (late: actual over the fit) and below
	// it. Queueing the router did not foresee (requests of one burst
	// reaching an instance out of order, arrivals after the pick) makes a
	// request late far more often than anything makes it early, so the
	// late clip is the tighter: with a fraction ε of contaminated
	// samples, the fit moves by about ε/(1−ε) times the clip on their
	// side, whatever their size (2 % for 30 % late samples).
	LateClip, EarlyClip = 0.05, 0.10
	// MaxQueueSeenAge: a pick whose chosen instance's report was older
	// than this saw a stale queue; its outcome is not a sample.
	MaxQueueSeenAgeMs = 1000
	// Bounds of the queue correction θ3: the scheduler's (a published
	// fit's Calibration.QueueScale).
	MinQueueScale, MaxQueueScale = scheduler.MinQueueScale, scheduler.MaxQueueScale
	// ResidualFloorMs is the least denominator of a sample's relative
	// residual in MeanAbsRelResidual, in ms: |actual − fit| / max(actual,
	// fit, 10 ms), so that a near-zero prediction or TTFT does not blow the
	// mean up (each sample's term is in [0, 1]).
	ResidualFloorMs = 10
	// priorVar is the initial variance of each (relative) coefficient.
	priorVar = 1.0
	// maxVar bounds the covariance's diagonal.
	maxVar = 4.0
)

// Sample is one outcome matched with its pick: what the router predicted
// from (the features) and what happened. A plain value.
type Sample struct {
	// Uncached and Cached are the request's new and cached prompt tokens on
	// the chosen instance.
	Uncached, Cached uint32
	// TPS is the prefill throughput the prediction used, tokens/s.
	TPS float64
	// QueueMs is the queue ahead the router saw; BatchWaitMs the policy's
	// batch wait; ActualMs the observed time to first token, all in ms.
	QueueMs, BatchWaitMs, ActualMs float64
	// QueueSeen is false when the router could not see the queue the
	// request met (a stale report, a saturated pick, a fallback to another
	// instance): such a sample is ignored.
	QueueSeen bool
}

// Fitter is one deployment's online fit. Its zero value is not ready: use
// NewFitter. Not safe for concurrent use (Book serialises it).
type Fitter struct {
	cref     float64 // reference doubling context (tokens)
	prior    [3]float64
	theta    [3]float64
	p        [3][3]float64
	absRes   float64 // running mean |relative residual|
	accepted uint64
	ignored  uint64
	clipped  uint64
	version  uint64
}

// NewFitter returns a fitter whose prior is the policy's doubling context
// (0: no attention term; the reference is then DefaultDoublingContextTokens
// and the prior's θ2 is 0).
func NewFitter(priorDoubling float64) *Fitter {
	f := &Fitter{cref: priorDoubling}
	f.prior = [3]float64{1, 1, 1}
	if priorDoubling <= 0 {
		f.cref = scheduler.DefaultDoublingContextTokens
		f.prior[1] = 0
	}
	f.theta = f.prior
	for i := range 3 {
		f.p[i][i] = priorVar
	}
	f.absRes = 0.5
	return f
}

// features returns the sample's row (D, A, Q) and its target y, in ms.
func (f *Fitter) features(s *Sample) (x [3]float64, y float64) {
	msPerTok := 1000 / s.TPS
	u := float64(s.Uncached)
	x[0] = u * msPerTok
	x[1] = u * (float64(s.Cached) + u/2) / f.cref * msPerTok
	x[2] = s.QueueMs
	return x, s.ActualMs - s.BatchWaitMs
}

// Add feeds one sample and reports whether it was accepted (a sample whose
// queue the router did not see, or with figures out of range, is not).
// It does not allocate.
func (f *Fitter) Add(s *Sample) bool {
	if !s.QueueSeen || !(s.TPS > 0 && s.TPS <= math.MaxFloat64) || !(s.ActualMs >= 0 && s.ActualMs <= math.MaxFloat64) ||
		!(s.QueueMs >= 0 && s.QueueMs <= math.MaxFloat64) || !(s.BatchWaitMs >= 0) {
		f.ignored++
		return false
	}
	x, y := f.features(s)
	pred := f.prior[0]*x[0] + f.prior[1]*x[1] + f.prior[2]*x[2]
	norm := 1 / max(pred, 1) // relative rows; at least 1 ms
	for i := range x {
		x[i] *= norm
	}
	y *= norm
	fit := f.theta[0]*x[0] + f.theta[1]*x[1] + f.theta[2]*x[2]
	e := y - fit
	f.absRes += (relResidual(s.ActualMs, fit/norm+s.BatchWaitMs) - f.absRes) / 32
	// Asymmetric Huber (docs/model.md): a late residual pulls by at most
	// LateClip of the fit's prediction, an early one by at most
	// EarlyClip; w = ψ(e)/e weighs the sample in the covariance too
	// (IRLS), so a clipped sample counts as little information.
	lim := max(fit, 0.01)
	psi := min(max(e, -EarlyClip*lim), LateClip*lim)
	w := 1.0
	if psi != e {
		w = psi / e
		f.clipped++
	}
	// Weighted RLS: k = w P x / (λ + w xᵀ P x); θ += k e; P = (P − k xᵀ P) / λ.
	var px [3]float64
	for i := range 3 {
		px[i] = f.p[i][0]*x[0] + f.p[i][1]*x[1] + f.p[i][2]*x[2]
	}
	den := Forgetting + w*(x[0]*px[0]+x[1]*px[1]+x[2]*px[2])
	for i := range 3 {
		k := w * px[i] / den
		f.theta[i] += k * e
		for j := range 3 {
			f.p[i][j] = (f.p[i][j] - k*px[j]) / Forgetting
		}
	}
	f.boundCovariance()
	f.clamp()
	f.accepted++
	if f.accepted >= MinSamples && (f.accepted-MinSamples)%PublishEvery == 0 {
		f.version++
	}
	return true
}

// relResidual returns |actual − pred| / max(actual, pred, ResidualFloorMs),
// in [0, 1] for figures >= 0 (ms).
func relResidual(actual, pred float64) float64 {
	return math.Abs(actual-pred) / max(actual, pred, ResidualFloorMs)
}

// boundCovariance scales the rows and columns of P whose variance grew
// over maxVar (a coefficient the samples do not excite), keeping P
// symmetric positive semi-definite.
func (f *Fitter) boundCovariance() {
	for i := range 3 {
		if v := f.p[i][i]; v > maxVar || !(v >= 0) {
			s := 0.0
			if v > 0 {
				s = math.Sqrt(maxVar / v)
			}
			for j := range 3 {
				f.p[i][j] *= s
				f.p[j][i] *= s
			}
			if !(v > 0) {
				f.p[i][i] = maxVar
			}
		}
	}
}

// clamp keeps θ within the limits: θ1 in [MinPrefillScale,
// MaxPrefillScale], θ2 such that the doubling context is in
// [MinDoublingContextTokens, MaxDoublingContextTokens] (or 0 when the fit
// says the attention term is nil), θ3 in [MinQueueScale, MaxQueueScale].
func (f *Fitter) clamp() {
	f.theta[0] = clampF(f.theta[0], scheduler.MinPrefillScale, scheduler.MaxPrefillScale)
	lo := f.theta[0] * f.cref / scheduler.MaxDoublingContextTokens
	hi := f.theta[0] * f.cref / scheduler.MinDoublingContextTokens
	f.theta[1] = clampF(f.theta[1], lo, hi)
	f.theta[2] = clampF(f.theta[2], MinQueueScale, MaxQueueScale)
}

func clampF(v, lo, hi float64) float64 {
	if !(v >= lo) { // NaN too
		return lo
	}
	return min(v, hi)
}
