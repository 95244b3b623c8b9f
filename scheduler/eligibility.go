package scheduler

import (
	"fmt"
	"math"
)

// eligibility returns the first eligibility check that in fails under p, in
// the order of the Reason constants, or ReasonNone. queueMs is the
// instance's queue_ms (see cost). A prefill instance is never eligible as
// the pick's (decode) instance: ReasonPrefillRole.
func eligibility(p *Policy, in *Instance, queueMs float64) Reason {
	if in.Role == RolePrefill {
		return ReasonPrefillRole
	}
	return serveEligibility(p, in, queueMs)
}

// serveEligibility is eligibility without the role check: whether in can
// serve at all (the prefill stage's check of prefill instances).
func serveEligibility(p *Policy, in *Instance, queueMs float64) Reason {
	switch {
	case in.Disconnected:
		return ReasonDisconnected
	case in.ReportAge > p.StaleAfter:
		return ReasonStale
	case in.Unreachable:
		return ReasonUnreachable
	case in.Draining:
		return ReasonDraining
	case in.Excluded:
		return ReasonExcluded
	case kvFull(p, in):
		return ReasonKVFull
	case p.MaxQueueMs > 0 && queueMs > p.MaxQueueMs:
		return ReasonQueueFull
	}
	return ReasonNone
}

// badFigure reports whether v is not a finite number >= 0.
func badFigure(v float64) bool {
	return !(v >= 0 && v <= math.MaxFloat64)
}

// checkRequest validates the request's figures.
func checkRequest(req *Request) error {
	if w := req.PrefillWeight; w != 0 && !(w >= 1 && w <= math.MaxFloat64) {
		return fmt.Errorf("%w: request: PrefillWeight is %v, want 0 or a finite number >= 1", ErrInvalidSnapshot, w)
	}
	if req.Blocks < 0 {
		return fmt.Errorf("%w: request: Blocks is %d, want >= 0", ErrInvalidSnapshot, req.Blocks)
	}
	return checkTarget(req)
}

// checkDeployments validates every deployment's figures.
func checkDeployments(snap *Snapshot) error {
	for k := range snap.Deployments {
		dep := &snap.Deployments[k]
		if badFigure(dep.Weight) {
			return fmt.Errorf("%w: deployment %q (index %d): Weight is %v, want a finite number >= 0",
				ErrInvalidSnapshot, dep.Name, k, dep.Weight)
		}
		if err := dep.Calibration.check(k, dep.Name); err != nil {
			return err
		}
	}
	return nil
}

// checkInstance validates the figures of instance i, in, of a snapshot with
// nd deployments.
func checkInstance(i int, in *Instance, nd int) error {
	var field string
	var value any
	switch {
	case in.Deployment < 0 || in.Deployment >= nd:
		return fmt.Errorf("%w: instance %q (index %d): Deployment index %d out of range [0, %d)",
			ErrInvalidSnapshot, in.ID, i, in.Deployment, nd)
	case in.MatchedBlocks < 0:
		field, value = "MatchedBlocks", in.MatchedBlocks
	case badFigure(in.PrefillTokensPerSecond):
		field, value = "PrefillTokensPerSecond", in.PrefillTokensPerSecond
	case badFigure(in.QueueMs):
		field, value = "QueueMs", in.QueueMs
	case badFigure(in.KVUsage):
		field, value = "KVUsage", in.KVUsage
	case badFigure(in.AssignedKVUsage):
		field, value = "AssignedKVUsage", in.AssignedKVUsage
	case in.ReportAge < 0:
		field, value = "ReportAge", in.ReportAge
	default:
		return nil
	}
	return fmt.Errorf("%w: instance %q (index %d): %s is %v, want a finite number >= 0",
		ErrInvalidSnapshot, in.ID, i, field, value)
}

// costOverflow is the error for an instance whose cost is not finite.
func costOverflow(i int, in *Instance, r *InstanceResult) error {
	return fmt.Errorf("%w: instance %q (index %d): cost is not finite (prefill %v ms, queue %v ms); PrefillTokensPerSecond %v too small?",
		ErrInvalidSnapshot, in.ID, i, r.PrefillMs, r.QueueMs, in.PrefillTokensPerSecond)
}

// validInstance is the fast, inlinable check that in's figures are valid.
// When it fails, checkInstance says why, or finds that they are valid after
// all (it accepts -0).
func validInstance(in *Instance, nd int) bool {
	// A float64 is finite and >= +0 iff its bits are below those of +Inf
	// (the sign bit makes negatives larger): one branch for three figures.
	const inf = 0x7ff0000000000000
	return uint(in.Deployment) < uint(nd) && in.MatchedBlocks >= 0 && in.ReportAge >= 0 &&
		max(math.Float64bits(in.PrefillTokensPerSecond), math.Float64bits(in.QueueMs), math.Float64bits(in.KVUsage),
			math.Float64bits(in.AssignedKVUsage)) < inf
}

// assess runs the first pass over the instances: it validates each, fills its
// cost parts and eligibility reason, and gathers the per-deployment minimum
// cost, minimum load and longest match over the eligible instances. It
// returns the number of eligible instances. On error the results of the
// instances from the bad one on are zero.
func assess(p *Policy, req *Request, snap *Snapshot, d *Decision) (int, error) {
	nd := len(snap.Deployments)
	m := newCostModel(p, req)
	m.withDeployments(p, snap.Deployments)
	eligible, target := 0, req.TTFTTargetMs
	lanes := p.ShortLanes > 0
	if lanes {
		markLanes(p, snap, d, -1)
	}
	for i := range snap.Instances {
		in, r := &snap.Instances[i], &d.Instances[i]
		if !validInstance(in, nd) {
			if err := checkInstance(i, in, nd); err != nil {
				clear(d.Instances[i:])
				return eligible, err
			}
		}
		matched := m.cost(in, r)
		r.ShortLane = lanes && d.deps[in.Deployment].inLane(in)
		if !(r.CostMs <= math.MaxFloat64) { // +Inf, or NaN from 0 * (1000/tiny tps)
			err := costOverflow(i, in, r)
			clear(d.Instances[i:])
			return eligible, err
		}
		if r.Reason = eligibility(p, in, r.QueueMs); r.Reason != ReasonNone {
			d.Excluded[r.Reason]++
			if r.Reason == ReasonKVFull || r.Reason == ReasonQueueFull {
				noteFull(&d.Deployments[in.Deployment], &d.deps[in.Deployment], r, matched)
			}
			continue
		}
		eligible++
		dr, st := &d.Deployments[in.Deployment], &d.deps[in.Deployment]
		load := r.QueueMs + r.BatchWaitMs
		if dr.Eligible == 0 {
			st.minCost, st.minLoad, dr.MatchedBlocks = r.CostMs, load, matched
		} else {
			// Plain comparisons: the figures are valid, never NaN.
			if r.CostMs < st.minCost {
				st.minCost = r.CostMs
			}
			if load < st.minLoad {
				st.minLoad = load
			}
			if matched > dr.MatchedBlocks {
				dr.MatchedBlocks = matched
			}
		}
		dr.Eligible++
		if target > 0 {
			st.noteSLO(r, target)
		}
		if lanes {
			st.noteLane(p, r, target)
		}
	}
	return eligible, nil
}

// noteFull counts a full instance (excluded only for load) in its
// deployment: Full, and the longest match and the load range over those,
// which a Held deployment is drawn by.
func noteFull(dr *DeploymentResult, st *depState, r *InstanceResult, matched int) {
	load := r.QueueMs + r.BatchWaitMs
	if dr.Full == 0 {
		st.fullMatched, st.fullMinLoad, st.fullMax = matched, load, load
	} else {
		st.fullMatched = max(st.fullMatched, matched)
		st.fullMinLoad, st.fullMax = min(st.fullMinLoad, load), max(st.fullMax, load)
	}
	dr.Full++
}
