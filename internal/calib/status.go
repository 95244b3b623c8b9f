package calib

import "github.com/prefixroute/prefixroute/scheduler"

// Status is a fit as an operator reads it. A plain value.
type Status struct {
	// Version counts the fit's publications (0: fewer than MinSamples
	// accepted samples; the prior prices the deployment).
	Version uint64
	// Accepted, Ignored and Clipped count samples: used, refused (queue
	// not seen, figures out of range), used with a clipped residual.
	Accepted, Ignored, Clipped uint64
	// PrefillScale multiplies the prior's prefill time; DoublingContextTokens
	// is the fitted C; QueueScale the fitted correction of the queue
	// estimate (reported only, not published to the scheduler: applied,
	// it let placements join longer queues in the noisy burst; see
	// TestDispatchWithinLimitCalibrated).
	PrefillScale, DoublingContextTokens, QueueScale float64
	// MeanAbsRelResidual is the running mean (over about the last 32
	// samples) of |actual − fit| / max(actual, fit, ResidualFloorMs), the
	// fit's TTFT prediction before the sample, a fraction in [0, 1].
	MeanAbsRelResidual float64
}

// Status returns the fit's current figures.
func (f *Fitter) Status() Status {
	return Status{Version: f.version, Accepted: f.accepted, Ignored: f.ignored, Clipped: f.clipped,
		PrefillScale: f.theta[0], DoublingContextTokens: f.doubling(), QueueScale: f.theta[2], MeanAbsRelResidual: f.absRes}
}

// doubling is the fitted C = θ1·Cref/θ2, rounded to whole tokens, within
// the scheduler's bounds.
func (f *Fitter) doubling() float64 {
	c := f.theta[0] * f.cref / f.theta[1]
	c = min(max(c, scheduler.MinDoublingContextTokens), scheduler.MaxDoublingContextTokens)
	return float64(int64(c + 0.5))
}

// Calibration returns the fit as the scheduler prices with it: Version 0
// until MinSamples samples were accepted.
func (f *Fitter) Calibration() scheduler.Calibration {
	if f.version == 0 {
		return scheduler.Calibration{}
	}
	return scheduler.Calibration{Version: f.version, PrefillScale: f.theta[0], DoublingContextTokens: f.doubling()}
}

// Predict is the fit's TTFT for s, in ms (the prior's until MinSamples).
func (f *Fitter) Predict(s *Sample) float64 {
	x, _ := f.features(s)
	th := f.prior
	if f.version > 0 {
		th = f.theta
	}
	return th[0]*x[0] + th[1]*x[1] + th[2]*x[2] + s.BatchWaitMs
}
