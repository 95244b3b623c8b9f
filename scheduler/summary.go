package scheduler

import (
	"fmt"
	"math"
)

// Summary is one deployment's instances as the deployment level of a
// decision sees them (what Decide's first pass gathers): a caller that keeps
// these figures up to date can decide with DecideDeployment and
// DecideInstance, looking at the instances of the drawn deployment only. It
// is a plain value.
type Summary struct {
	// Eligible counts the deployment's eligible instances.
	Eligible int
	// MatchedBlocks is the most MatchedBlocks over them (clamped to
	// Request.Blocks by DecideDeployment).
	MatchedBlocks int
	// LoadMs is SoftMinLoadMs of their loads in snapshot order, when the
	// load term is on (Policy.DeploymentDeltaMs > 0) and Eligible > 0.
	LoadMs float64
	// Full counts its instances excluded only for load (ReasonKVFull,
	// ReasonQueueFull). Under SaturationQueue a deployment with Full > 0
	// and no eligible instance is Held, which DecideDeployment leaves to
	// Decide.
	Full int
}

// Standing returns what instance in's eligibility and load term depend on
// apart from the request and the time: its eligibility reason ignoring
// ReportAge and Excluded (ReasonPrefillRole, ReasonDisconnected, ReasonUnreachable, ReasonDraining, ReasonKVFull,
// ReasonQueueFull or ReasonNone; see ReasonAt), and its load
// QueueMs + BatchWaitMs as Decide computes them. ok is false when in's
// figures are not valid (see Decide) or its cost can overflow for some
// request: such an instance needs Decide. p must be valid. It is
// StandingCalibrated without a calibration.
func Standing(p *Policy, in *Instance) (reason Reason, loadMs float64, ok bool) {
	return StandingCalibrated(p, nil, in)
}

// StandingCalibrated is Standing for an instance of a deployment whose
// Calibration is c (nil: none): its queue estimate is multiplied by
// c.AppliedQueueScale(p), as Decide does.
func StandingCalibrated(p *Policy, c *Calibration, in *Instance) (reason Reason, loadMs float64, ok bool) {
	if badFigure(in.PrefillTokensPerSecond) || badFigure(in.QueueMs) || !validKV(in) {
		return ReasonNone, 0, false
	}
	m := newCostModel(p, &Request{})
	msPerTok, queue := m.queue(in)
	if c != nil {
		if qs := c.AppliedQueueScale(p); qs != 1 {
			queue *= qs
		}
	}
	// The prefill part is at most MaxUint32 tokens: monotone, so the worst
	// case bounds every request's cost.
	if !(float64(math.MaxUint32)*msPerTok+queue+m.batchWaitMs <= math.MaxFloat64) {
		return ReasonNone, 0, false
	}
	switch {
	case in.Role == RolePrefill:
		reason = ReasonPrefillRole
	case in.Disconnected:
		reason = ReasonDisconnected
	case in.Unreachable:
		reason = ReasonUnreachable
	case in.Draining:
		reason = ReasonDraining
	case kvFull(p, in):
		reason = ReasonKVFull
	case p.MaxQueueMs > 0 && queue > p.MaxQueueMs:
		reason = ReasonQueueFull
	}
	return reason, queue + m.batchWaitMs, true
}

// ReasonAt returns the eligibility reason of an instance whose Standing
// reason is standing, stale when its ReportAge > Policy.StaleAfter, excluded
// when the request excludes it: the first check that fails in the order of
// the Reason constants, as Decide records it.
func ReasonAt(standing Reason, stale, excluded bool) Reason {
	switch {
	case standing == ReasonPrefillRole, standing == ReasonDisconnected:
		return standing
	case stale:
		return ReasonStale
	case standing == ReasonDraining, standing == ReasonUnreachable:
		return standing
	case excluded:
		return ReasonExcluded
	}
	return standing
}

// SoftMinLoadMs returns L_d of a deployment whose eligible instances have
// loads (QueueMs + BatchWaitMs, in snapshot order), exactly as Decide
// computes it (see loadTerms), under a policy with DeploymentDeltaMs > 0;
// 0 when loads is empty.
func SoftMinLoadMs(p *Policy, loads []float64) float64 {
	if len(loads) == 0 {
		return 0
	}
	minLoad, maxLoad := loads[0], 0.0
	for _, q := range loads[1:] {
		if q < minLoad {
			minLoad = q
		}
	}
	delta := p.DeploymentDeltaMs
	negInvDelta := -1 / delta
	sum := 0.0
	for _, q := range loads {
		maxLoad = max(maxLoad, q)
		if diff := q - minLoad; diff > 0 {
			sum += exp2neg(diff * negInvDelta)
		} else {
			sum++
		}
	}
	l := minLoad + delta*math.Log2(float64(len(loads))/sum)
	return min(max(l, minLoad), maxLoad)
}

// DecideDeployment is the first half of a decision from per-deployment
// summaries instead of every instance: it fills the deployment level of d
// (as Decide does, from sums[k] for deployment k), sets d.Excluded to
// excluded (the eligibility reasons of every instance) and draws the
// deployment into d.Deployment (d.Instance stays -1); DecideInstance finishes. On success it
// makes one draw from rng.
//
// It returns the errors of Decide's precheck, ErrInvalidArgument when sums
// does not parallel deps, and, without a draw, ErrNoEligibleInstance when no
// instance is eligible, ErrAllWeightsZero when none participates and
// ErrDeploymentSaturated when, under SaturationQueue, a deployment of
// weight > 0 has no eligible instance but full ones (Summary.Full; it is
// Held): for these the audit needs every instance (and saturation may
// still pick), so call Decide instead. Safe for concurrent use under the terms of Decide.
func DecideDeployment(p *Policy, req Request, deps []Deployment, sums []Summary, excluded *[NumReasons]int, rng RNG, d *Decision) error {
	if d == nil || excluded == nil {
		return fmt.Errorf("%w: nil *Decision or excluded counts", ErrInvalidArgument)
	}
	snap := Snapshot{Deployments: deps}
	d.reset(len(deps), 0)
	if err := precheck(p, &req, &snap, rng); err != nil {
		return err
	}
	d.PrefillWeight = max(1, req.PrefillWeight)
	d.TTFTTargetMs = req.TTFTTargetMs
	if len(sums) != len(deps) {
		return fmt.Errorf("%w: %d summaries for %d deployments", ErrInvalidArgument, len(sums), len(deps))
	}
	d.Excluded = *excluded
	loadOn := p.DeploymentDeltaMs > 0
	eligible := 0
	hold := p.OnSaturation == SaturationQueue
	for k := range sums {
		s, dr := &sums[k], &d.Deployments[k]
		dr.Full = s.Full
		if s.Eligible <= 0 {
			if hold && s.Full > 0 && deps[k].Weight > 0 {
				return ErrDeploymentSaturated // Held: Decide draws it
			}
			continue
		}
		eligible += s.Eligible
		dr.Eligible, dr.MatchedBlocks = s.Eligible, max(0, min(s.MatchedBlocks, req.Blocks))
		if loadOn {
			dr.LoadMs = s.LoadMs
		}
	}
	participating := deploymentLevel(p, &req, &snap, d, false)
	switch {
	case eligible == 0:
		return ErrNoEligibleInstance
	case participating == 0:
		return ErrAllWeightsZero
	}
	d.DeploymentDraw = rng.Float64()
	d.Deployment = pickDeployment(d, d.DeploymentDraw)
	if d.Deployment < 0 { // unreachable, as in Decide
		return fmt.Errorf("%w: internal error: no deployment with a positive probability", ErrNoEligibleInstance)
	}
	return nil
}

// DecideInstance finishes a decision DecideDeployment began in d: snap holds
// the deployments and only the instances of d.Deployment, in snapshot order
// (their Deployment field is d.Deployment). It fills their results as Decide
// with Request.ChosenOnly does (d.Instances parallels snap.Instances), adds
// the strategy reasons to d.Excluded, and draws the instance into
// d.Instance with one more draw. The instances must agree with the
// summary: ErrInvalidSnapshot when one is invalid or belongs to another
// deployment, or their eligible count is not the summary's. With a TTFT
// target under SLOShed and no instance of the drawn deployment predicted
// to meet it, it returns ErrSLODeploymentMiss without a draw. Safe for
// concurrent use under the terms of Decide.
func DecideInstance(p *Policy, req Request, snap *Snapshot, rng RNG, d *Decision) error {
	if d == nil {
		return fmt.Errorf("%w: nil *Decision", ErrInvalidArgument)
	}
	dep := d.Deployment
	d.Deployment, d.Instance = -1, -1 // until it succeeds
	if snap == nil || dep < 0 || dep >= len(snap.Deployments) || dep >= len(d.Deployments) || rng == nil {
		return fmt.Errorf("%w: no deployment drawn, or a nil snapshot or RNG", ErrInvalidArgument)
	}
	if cap(d.Instances) < len(snap.Instances) {
		d.Instances = make([]InstanceResult, len(snap.Instances))
	}
	d.Instances = d.Instances[:len(snap.Instances)]
	m := newCostModel(p, &req)
	m.withDeployments(p, snap.Deployments)
	d.PrefillWeight = m.prefillWeight
	d.TTFTTargetMs = req.TTFTTargetMs
	st := &d.deps[dep]
	st.slo, st.meets = 0, 0
	nd, eligible := len(snap.Deployments), 0
	lanes := p.ShortLanes > 0
	if lanes {
		markLanes(p, snap, d, dep)
	}
	for i := range snap.Instances {
		in, r := &snap.Instances[i], &d.Instances[i]
		if in.Deployment != dep || !validInstance(in, nd) {
			clear(d.Instances[i:])
			if err := checkInstance(i, in, nd); err != nil {
				return err
			}
			return fmt.Errorf("%w: instance %q (index %d) is in deployment %d, not the drawn %d",
				ErrInvalidSnapshot, in.ID, i, in.Deployment, dep)
		}
		m.cost(in, r)
		r.ShortLane = lanes && st.inLane(in)
		if !(r.CostMs <= math.MaxFloat64) {
			err := costOverflow(i, in, r)
			clear(d.Instances[i:])
			return err
		}
		if r.Reason = eligibility(p, in, r.QueueMs); r.Reason != ReasonNone {
			continue
		}
		if eligible == 0 || r.CostMs < st.minCost {
			st.minCost = r.CostMs
		}
		eligible++
		if req.TTFTTargetMs > 0 {
			st.noteSLO(r, req.TTFTTargetMs)
		}
		if lanes {
			st.noteLane(p, r, req.TTFTTargetMs)
		}
	}
	if eligible != d.Deployments[dep].Eligible {
		return fmt.Errorf("%w: deployment %d has %d eligible instances, its summary %d",
			ErrInvalidSnapshot, dep, eligible, d.Deployments[dep].Eligible)
	}
	if req.TTFTTargetMs > 0 && p.OnSLOMiss == SLOShed && st.meets == 0 {
		return ErrSLODeploymentMiss
	}
	instanceWeights(p, snap, d, dep)
	d.InstanceDraw = rng.Float64()
	inst := normalise(snap, d, dep, d.InstanceDraw)
	if inst < 0 { // unreachable, as in Decide
		return fmt.Errorf("%w: internal error: no instance with a positive probability in deployment %d",
			ErrNoEligibleInstance, dep)
	}
	d.Deployment, d.Instance = dep, inst
	if err := decidePD(p, snap, rng, d); err != nil {
		return err
	}
	d.setSLOMet()
	return nil
}
