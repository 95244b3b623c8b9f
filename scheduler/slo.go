package scheduler

import (
	"errors"
	"fmt"
)

// SLOMiss is what Decide does when a request carries a TTFT target
// (Request.TTFTTargetMs) that no eligible instance of any deployment with
// P(d) > 0 is predicted to meet. A plain value, safe for concurrent use.
type SLOMiss uint8

const (
	// SLOBestEffort decides as without a target (the drawn deployment's
	// instances by the strategy) and records that the pick misses it
	// (Decision.SLOMet false). The default.
	SLOBestEffort SLOMiss = iota
	// SLOShed returns ErrSLOUnattainable so that the caller sheds the
	// request; Decision.SLOBestMs is the least predicted TTFT.
	SLOShed
	numSLOMisses
)

var sloMissNames = [numSLOMisses]string{
	SLOBestEffort: "best_effort",
	SLOShed:       "shed",
}

// String returns "best_effort" or "shed", and "SLOMiss(N)" for an unknown
// value.
func (s SLOMiss) String() string { return nameOf(sloMissNames[:], int(s), "SLOMiss") }

// MaxTTFTTargetMs bounds Request.TTFTTargetMs: 3,600,000 ms (one hour), the
// limit of an outcome's ttft_ms.
const MaxTTFTTargetMs = 3_600_000

// ErrSLOUnattainable: the request's TTFT target (Request.TTFTTargetMs) is
// over no eligible instance's predicted TTFT in the deployments with
// P(d) > 0, under Policy.OnSLOMiss = SLOShed. Decision.SLOBestMs is the
// least predicted TTFT among them.
var ErrSLOUnattainable = errors.New("scheduler: no instance is predicted to meet the TTFT target")

// ErrSLODeploymentMiss is returned by DecideInstance only, under
// Policy.OnSLOMiss = SLOShed, when no eligible instance of the drawn
// deployment is predicted to meet the target: another deployment may, so
// the caller must decide with Decide on the whole snapshot, replaying the
// deployment draw (Decision.DeploymentDraw) as the RNG's first value. No
// instance draw was made.
var ErrSLODeploymentMiss = errors.New("scheduler: the drawn deployment cannot meet the TTFT target; decide on the whole pool")

// PredictedTTFTMs is the predicted time to first token of the request on
// the instance of r: PrefillMs + QueueMs + BatchWaitMs, physical
// milliseconds (CostMs without the prefill weight). Pure.
func (r *InstanceResult) PredictedTTFTMs() float64 { return r.PrefillMs + r.QueueMs + r.BatchWaitMs }

// noteSLO counts the eligible instance of r against the request's target:
// meets and minMeetCost over those predicted to meet it, minTTFT over all.
// Called once per eligible instance, only when target > 0.
func (st *depState) noteSLO(r *InstanceResult, target float64) {
	t := r.PredictedTTFTMs()
	if st.slo == 0 || t < st.minTTFT {
		st.minTTFT = t
	}
	st.slo++
	if t <= target {
		if st.meets == 0 || r.CostMs < st.minMeetCost {
			st.minMeetCost = r.CostMs
		}
		st.meets++
	}
}

// sloAttainable finishes the deployment level of a decision whose request
// carries a target: it reports whether an eligible instance of a
// deployment with P(d) > 0 meets it, and sets d.SLOBestMs to the least
// predicted TTFT of those deployments' eligible instances when none does.
func sloAttainable(d *Decision) bool {
	best, seen := 0.0, false
	for k := range d.Deployments {
		st := &d.deps[k]
		if d.Deployments[k].Probability <= 0 || st.slo == 0 {
			continue
		}
		if st.meets > 0 {
			return true
		}
		if !seen || st.minTTFT < best {
			best, seen = st.minTTFT, true
		}
	}
	d.SLOBestMs = best
	return false
}

// setSLOMet records whether the pick is predicted to meet the target, when
// the request carries one: the chosen instance's predicted TTFT or, when the
// prefill stage disaggregated, the prefill instance's plus the KV transfer.
func (d *Decision) setSLOMet() {
	if d.TTFTTargetMs <= 0 || d.Instance < 0 {
		return
	}
	ttft := d.Instances[d.Instance].PredictedTTFTMs()
	if d.PD.Disaggregated() { // the prefill instance's TTFT and the KV transfer
		ttft = d.Instances[d.PD.Prefill].PredictedTTFTMs() + d.PD.TransferMs
	}
	d.SLOMet = ttft <= d.TTFTTargetMs
}

// checkTarget validates Request.TTFTTargetMs.
func checkTarget(req *Request) error {
	if t := req.TTFTTargetMs; t != 0 && !(t > 0 && t <= MaxTTFTTargetMs) {
		return fmt.Errorf("%w: request: TTFTTargetMs is %v, want 0 (none) or a number of ms in (0, %d]",
			ErrInvalidSnapshot, t, MaxTTFTTargetMs)
	}
	return nil
}
