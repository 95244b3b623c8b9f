package scheduler

import "math"

// deploymentLevel fills the deployment audit and P(d) for every deployment,
// after assess. It returns the number of participating deployments: those
// with an eligible instance and a weight > 0. When none participates, every
// P(d) is 0.
//
// With the load term off, P(d) is the seed's
//
//	P_d = w_d 2^(λ H_d) / Σ_k w_k 2^(λ H_k)
//
// over the participating deployments; with it on (DeploymentDeltaMs = δ > 0)
// each term is multiplied by 2^(-(L_d - L_min)/δ), L_min being the least L_d
// of the participating deployments.
//
// Stability: with y_d = λ H_d [- (L_d - L_min)/δ], each term is computed as
// (w_d 2^-e) 2^(y_d - y_max), e the binary exponent of the largest weight:
// every factor is at most 1 and the scaling is exact, so nothing overflows
// and a cold prefix splits exactly by weight. Only when that sum falls below
// 2^-900 (a weight ratio beyond 2^900 against a load term of as many
// doublings) does it fall back to log space, x_d = log2 w_d + y_d shifted by
// its maximum, which is finite for any finite weights.
//
// With loads false the caller has filled LoadMs (DecideDeployment) and
// snap.Instances is not read.
func deploymentLevel(p *Policy, req *Request, snap *Snapshot, d *Decision, loads bool) int {
	participating := 0
	maxWeight := 0.0
	hold := p.OnSaturation == SaturationQueue
	for k := range snap.Deployments {
		dep, dr := &snap.Deployments[k], &d.Deployments[k]
		dr.Weight = dep.Weight
		if hold && dr.Eligible == 0 && dr.Full > 0 && dep.Weight > 0 {
			dr.Held, dr.MatchedBlocks = true, d.deps[k].fullMatched
		}
		if req.Blocks > 0 {
			dr.HitRatio = float64(dr.MatchedBlocks) / float64(req.Blocks)
		}
		switch {
		case dep.Weight == 0 && dep.Unweighted:
			dr.Reason = ReasonUnweighted
		case dep.Weight == 0:
			dr.Reason = ReasonZeroWeight
		case dr.Eligible == 0 && !dr.Held:
			dr.Reason = ReasonNoEligibleInstance
		default:
			participating++
			maxWeight = max(maxWeight, dep.Weight)
		}
	}
	loadOn := p.DeploymentDeltaMs > 0
	if loadOn && loads {
		loadTerms(p, snap, d)
	}
	if participating == 0 {
		return 0
	}
	minLoad := 0.0
	if loadOn {
		first := true
		for k := range d.Deployments {
			if dr := &d.Deployments[k]; dr.Reason == ReasonNone && (first || dr.LoadMs < minLoad) {
				minLoad, first = dr.LoadMs, false
			}
		}
	}

	maxY := math.Inf(-1)
	for k := range d.Deployments {
		dr := &d.Deployments[k]
		if dr.Reason != ReasonNone {
			continue
		}
		y := p.LambdaH * dr.HitRatio
		if loadOn {
			y -= (dr.LoadMs - minLoad) / p.DeploymentDeltaMs
		}
		d.deps[k].logit = y
		maxY = max(maxY, y)
	}
	_, e := math.Frexp(maxWeight)
	scale := math.Ldexp(1, -e) // maxWeight*scale in [0.5, 1)
	sum := 0.0
	for k := range d.Deployments {
		if dr := &d.Deployments[k]; dr.Reason == ReasonNone {
			dr.Probability = dr.Weight * scale
			if y := d.deps[k].logit - maxY; y != 0 { // 0 for a cold prefix: no exp
				dr.Probability *= exp2neg(y)
			}
			sum += dr.Probability
		}
	}
	if !(sum >= 0x1p-900) {
		sum = deploymentLogSpace(d)
	}
	for k := range d.Deployments {
		if dr := &d.Deployments[k]; dr.Reason == ReasonNone {
			dr.Probability /= sum
		}
	}
	return participating
}

// deploymentLogSpace recomputes the unnormalised P(d) of the participating
// deployments from x_d = log2 w_d + y_d (y_d in deps[k].logit), shifted by
// the largest x_d, and returns their sum, which is >= 1.
func deploymentLogSpace(d *Decision) float64 {
	maxX := math.Inf(-1)
	for k := range d.Deployments {
		if dr := &d.Deployments[k]; dr.Reason == ReasonNone {
			d.deps[k].logit += math.Log2(dr.Weight)
			maxX = max(maxX, d.deps[k].logit)
		}
	}
	sum := 0.0
	for k := range d.Deployments {
		if dr := &d.Deployments[k]; dr.Reason == ReasonNone {
			dr.Probability = math.Exp2(d.deps[k].logit - maxX)
			sum += dr.Probability
		}
	}
	return sum
}

// loadTerms fills LoadMs of every deployment with an eligible instance: the
// soft-min of its eligible instances' loads q_i = QueueMs + BatchWaitMs
// (of a Held deployment: its full instances'),
//
//	L_d = -δ log2( mean_i 2^(-q_i/δ) ),   δ = DeploymentDeltaMs,
//
// which lies between min_i q_i and mean_i q_i (tending to the minimum as δ
// shrinks and to the mean as it grows). It is computed as
// q_min + δ log2(n / Σ_i 2^(-(q_i-q_min)/δ)), each term in [0, 1] and the
// sum >= 1, and clamped to [q_min, q_max] so that even δ near the largest
// float64 keeps it finite.
func loadTerms(p *Policy, snap *Snapshot, d *Decision) {
	delta := p.DeploymentDeltaMs
	negInvDelta := -1 / delta // may be -Inf for a subnormal delta: term 0
	for k := range d.Deployments {
		if d.Deployments[k].Held {
			st := &d.deps[k]
			st.minLoad, st.maxLoad = st.fullMinLoad, st.fullMax
		}
	}
	for i := range snap.Instances {
		r := &d.Instances[i]
		k := snap.Instances[i].Deployment
		if r.Reason != ReasonNone && !(d.Deployments[k].Held && (r.Reason == ReasonKVFull || r.Reason == ReasonQueueFull)) {
			continue
		}
		st := &d.deps[k]
		q := r.QueueMs + r.BatchWaitMs
		st.maxLoad = max(st.maxLoad, q)
		if diff := q - st.minLoad; diff > 0 {
			st.loadSum += exp2neg(diff * negInvDelta)
		} else {
			st.loadSum++
		}
	}
	for k := range d.Deployments {
		dr, st := &d.Deployments[k], &d.deps[k]
		n := dr.Eligible
		if dr.Held {
			n = dr.Full
		}
		if n == 0 {
			continue
		}
		dr.LoadMs = st.minLoad + delta*math.Log2(float64(n)/st.loadSum)
		dr.LoadMs = min(max(dr.LoadMs, st.minLoad), st.maxLoad)
	}
}
