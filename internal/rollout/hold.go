package rollout

import "fmt"

// ToLoad is what auto-hold knows of the prefill load on AutoHold.To, from
// the migration-readiness estimate of moving From's traffic to To.
type ToLoad struct {
	// Known is whether the estimate could be made: To has an eligible
	// instance reporting its prefill throughput.
	Known bool
	// PrefillMsPerSec is To's prefill load now, in ms of prefill per
	// second; CapacityMsPerSec its capacity, in the same unit.
	PrefillMsPerSec, CapacityMsPerSec float64
	// ExtraPrefillMsPerSec is the prefill To would take on, in ms per
	// second, if From's whole traffic moved to it.
	ExtraPrefillMsPerSec float64
	// Missing says which side a disaggregated To lacks
	// (readiness.Migration.ToMissing); "" when none.
	Missing string
}

// HoldApplies reports whether auto-hold has a step of r to judge: it is on
// and a step is left. Only then is HoldReason asked (and the load
// estimated).
func (r *Ramp) HoldApplies() bool {
	_, next := r.Next()
	return r.AutoHold.MinHeadroomPct > 0 && next
}

// HoldReason returns why auto-hold should pause r before its next step, or
// "" to go on. The step moves a part of From's traffic to the other
// deployments: the share From loses in the step over the share it has now.
// To's headroom after the step is estimated as its current prefill load plus
// that part of the extra prefill it would absorb if From went to 0, over its
// capacity:
//
//	headroom% = 100 · (1 − (PrefillMsPerSec + moved · ExtraPrefillMsPerSec) / CapacityMsPerSec)
//
// An estimate that cannot be made (estimateErr set, or To without an
// eligible instance or throughput) holds the ramp too: the operator asked
// not to move traffic blind. A ramp HoldApplies says no to goes on.
func (r *Ramp) HoldReason(load ToLoad, estimateErr error) string {
	if !r.HoldApplies() {
		return ""
	}
	h := r.AutoHold
	next, _ := r.Next()
	if estimateErr != nil {
		return fmt.Sprintf("auto-hold: cannot estimate %s's headroom: %v", h.To, estimateErr)
	}
	if load.Missing != "" {
		return fmt.Sprintf("auto-hold: %s is not ready: %s", h.To, load.Missing)
	}
	if !load.Known || load.CapacityMsPerSec <= 0 {
		return fmt.Sprintf("auto-hold: %s has no eligible instance reporting its prefill throughput", h.To)
	}
	now, after := shareOf(r.Current(), h.From), shareOf(next.Weights, h.From)
	moved := 0.0
	if now > 0 {
		moved = max(0, (now-after)/now)
	}
	headroom := 100 * (1 - (load.PrefillMsPerSec+moved*load.ExtraPrefillMsPerSec)/load.CapacityMsPerSec)
	if headroom >= h.MinHeadroomPct {
		return ""
	}
	return fmt.Sprintf("auto-hold: step %d would leave %s %.1f%% prefill headroom (< %.4g%%)",
		r.Applied+1, h.To, headroom, h.MinHeadroomPct)
}

// shareOf is d's weight over the sum of w, 0 when the sum is not positive.
func shareOf(w map[string]float64, d string) float64 {
	if s := sum(w); s > 0 {
		return w[d] / s
	}
	return 0
}
