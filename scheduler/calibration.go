package scheduler

import "fmt"

// CalibrationMode says whether Decide prices prefill with each
// deployment's fitted model (Deployment.Calibration). A plain value, safe
// for concurrent use.
type CalibrationMode uint8

const (
	// CalibrationApply uses a deployment's Calibration when its Version is
	// > 0. The default: an operator who reads predicted_ttft_ms expects
	// the milliseconds that requests really take, and the fit is bounded
	// and falls back to the prior until it has enough samples.
	CalibrationApply CalibrationMode = iota
	// CalibrationObserve ignores Calibration: the policy's prior prices
	// every deployment (the fit is still reported).
	CalibrationObserve
	numCalibrationModes
)

var calibrationNames = [numCalibrationModes]string{
	CalibrationApply:   "apply",
	CalibrationObserve: "observe",
}

// String returns "apply" or "observe", and "CalibrationMode(N)" for an
// unknown value.
func (c CalibrationMode) String() string {
	return nameOf(calibrationNames[:], int(c), "CalibrationMode")
}

// Bounds of a Calibration's PrefillScale: the fitted prefill time is
// within 10× of the prior's either way.
const (
	MinPrefillScale = 0.1
	MaxPrefillScale = 10
)

// Bounds of a Calibration's QueueScale: the corrected queue estimate is
// within 4× of the reported one either way.
const (
	MinQueueScale = 0.25
	MaxQueueScale = 4
)

// Calibration is a deployment's prefill model fitted from what requests
// really took (internal/calib): under CalibrationApply and with Version >
// 0, an instance of the deployment prefills u new tokens on c cached ones
// in
//
//	PrefillScale · PrefillWork(u, c, DoublingContextTokens) · 1000 / tps
//
// instead of PrefillWork(u, c, Policy.DoublingContextTokens) · 1000 / tps,
// and that scaled work is what a pick adds to its queue (WorkTokens); its
// queue estimate (InstanceResult.QueueMs: the reported queue plus the
// router's assigned work) is multiplied by QueueScale, and that corrected
// queue is what the cost, the max_queue_ms check, the saturation drain
// times and Standing read. A plain value.
type Calibration struct {
	// Version numbers the fit; 0 means none (the prior).
	Version uint64
	// PrefillScale multiplies the prefill time: in [MinPrefillScale,
	// MaxPrefillScale] when Version > 0.
	PrefillScale float64
	// DoublingContextTokens is the deployment's C: 0 (no attention term)
	// or in [MinDoublingContextTokens, MaxDoublingContextTokens].
	DoublingContextTokens float64
	// QueueScale multiplies the queue estimate: 0 (read as 1: no
	// correction) or in [MinQueueScale, MaxQueueScale] when Version > 0.
	QueueScale float64
}

// AppliedQueueScale returns the factor Decide multiplies the queue estimate
// of c's deployment by under p: c.QueueScale when p applies calibrations,
// c.Version > 0 and c.QueueScale > 0, else 1.
func (c *Calibration) AppliedQueueScale(p *Policy) float64 {
	if p.Calibration == CalibrationApply && c.Version > 0 && c.QueueScale > 0 {
		return c.QueueScale
	}
	return 1
}

// check validates c for deployment k of the snapshot.
func (c *Calibration) check(k int, name string) error {
	if c.Version == 0 {
		return nil
	}
	if !(c.PrefillScale >= MinPrefillScale && c.PrefillScale <= MaxPrefillScale) {
		return fmt.Errorf("%w: deployment %q (index %d): Calibration.PrefillScale is %v, want [%g, %g]",
			ErrInvalidSnapshot, name, k, c.PrefillScale, float64(MinPrefillScale), float64(MaxPrefillScale))
	}
	if dc := c.DoublingContextTokens; dc != 0 && !(dc >= MinDoublingContextTokens && dc <= MaxDoublingContextTokens) {
		return fmt.Errorf("%w: deployment %q (index %d): Calibration.DoublingContextTokens is %v, want 0 or [%d, %g]",
			ErrInvalidSnapshot, name, k, dc, MinDoublingContextTokens, float64(MaxDoublingContextTokens))
	}
	if qs := c.QueueScale; qs != 0 && !(qs >= MinQueueScale && qs <= MaxQueueScale) {
		return fmt.Errorf("%w: deployment %q (index %d): Calibration.QueueScale is %v, want 0 or [%g, %g]",
			ErrInvalidSnapshot, name, k, qs, float64(MinQueueScale), float64(MaxQueueScale))
	}
	return nil
}

// queueScale returns the factor of instance in's queue estimate under m:
// its deployment's QueueScale when m applies calibrations (AppliedQueueScale).
func (m *costModel) queueScale(in *Instance) float64 {
	if m.deps != nil {
		if c := &m.deps[in.Deployment].Calibration; c.Version > 0 && c.QueueScale > 0 {
			return c.QueueScale
		}
	}
	return 1
}

// prefillModel returns the doubling context and prefill scale of instance
// in's deployment under m.
func (m *costModel) prefillModel(in *Instance) (doubling, scale float64) {
	if m.deps != nil {
		if c := &m.deps[in.Deployment].Calibration; c.Version > 0 {
			return c.DoublingContextTokens, c.PrefillScale
		}
	}
	return m.doubling, 1
}

// withDeployments makes m price each deployment by its Calibration when p
// applies them.
func (m *costModel) withDeployments(p *Policy, deps []Deployment) {
	if p.Calibration == CalibrationApply {
		for k := range deps {
			if deps[k].Calibration.Version > 0 {
				m.deps = deps
				return
			}
		}
	}
}
