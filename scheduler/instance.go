package scheduler

// instanceWeights gives every eligible instance its unnormalised weight
// under the policy's strategy, stored in InstanceResult.Probability, and
// sums them per deployment. S_min is the least cost of the eligible
// instances of the same deployment.
//
//   - Softmax: 2^(-(S_i - S_min)/DeltaMs), in (0, 1], 1 for the cheapest;
//     the shift by S_min cancels in the normalisation and keeps the
//     exponent <= 0, so costs of 1e-6 ms or 1e6 ms give finite weights.
//   - Threshold: 1 when S_i - S_min <= max(ThresholdRatio*S_min,
//     ThresholdMinMs), else 0 and ReasonThreshold.
//   - Argmin: 1 when S_i == S_min exactly, else 0 and ReasonNotMinimum.
//
// With a TTFT target (Decision.TTFTTargetMs) that some eligible instance of
// the deployment is predicted to meet, the others get 0 and ReasonSLOMiss
// first, and S_min is the least cost of those that meet it.
//
// With only < 0, every deployment with an eligible instance gets a sum >= 1,
// weight 0 deployments included, so that P(i|d) exists for the whole pool;
// with only >= 0, just the instances of deployment only are weighed (the
// others keep Probability 0, which normalise skips).
func instanceWeights(p *Policy, snap *Snapshot, d *Decision, only int) {
	negInvDelta := -1 / p.DeltaMs // may be -Inf for a subnormal DeltaMs: weight 0
	for i := range snap.Instances {
		r := &d.Instances[i]
		k := snap.Instances[i].Deployment
		if r.Reason != ReasonNone || (only >= 0 && k != only) {
			continue
		}
		st := &d.deps[k]
		minCost := st.minCost
		kept, minKept := st.kept, st.minKept
		if st.meets > 0 {
			if r.PredictedTTFTMs() > d.TTFTTargetMs {
				r.Probability = 0
				r.Reason = ReasonSLOMiss
				d.Excluded[ReasonSLOMiss]++
				continue
			}
			minCost = st.minMeetCost
			kept, minKept = st.keptMeet, st.minKeptMeet
		}
		if kept > 0 { // the short lane refuses some instance (lanes.go)
			if laneRefuses(p, r) {
				r.Probability = 0
				r.Reason = ReasonShortLane
				d.Excluded[ReasonShortLane]++
				continue
			}
			minCost = minKept
		}
		diff := r.CostMs - minCost
		w := 1.0
		switch p.Strategy {
		case Softmax:
			if diff > 0 {
				w = exp2neg(diff * negInvDelta)
			}
		case Threshold:
			if diff > max(p.ThresholdRatio*minCost, p.ThresholdMinMs) {
				w = 0
				r.Reason = ReasonThreshold
				d.Excluded[ReasonThreshold]++
			}
		case Argmin:
			if diff != 0 {
				w = 0
				r.Reason = ReasonNotMinimum
				d.Excluded[ReasonNotMinimum]++
			}
		}
		r.Probability = w
		st.norm += w
	}
}

// normalise turns the weights of instanceWeights into P(i|d) and Joint =
// P(d)*P(i|d). When chosen >= 0 it also draws the instance of deployment
// chosen with draw u and returns its index: the first positive-probability
// instance, in snapshot order, whose cumulative P(i|chosen) exceeds u, or
// the last positive-probability one when none does (u at or beyond the
// rounded total, or NaN). It returns -1 when chosen < 0.
func normalise(snap *Snapshot, d *Decision, chosen int, u float64) int {
	for k := range d.deps {
		if st := &d.deps[k]; st.norm > 0 {
			st.inv = 1 / st.norm
		}
	}
	picked, last := -1, -1
	cum := 0.0
	for i := range snap.Instances {
		r := &d.Instances[i]
		if r.Probability == 0 {
			continue
		}
		k := snap.Instances[i].Deployment
		r.Probability *= d.deps[k].inv
		r.Joint = d.Deployments[k].Probability * r.Probability
		if k != chosen || r.Probability == 0 {
			continue
		}
		last = i
		cum += r.Probability
		if picked < 0 && u < cum {
			picked = i
		}
	}
	if picked < 0 {
		picked = last
	}
	return picked
}

// pickDeployment draws the deployment with draw u by cumulative P(d), with
// the same rule as normalise. It returns -1 only when no deployment has a
// positive probability.
func pickDeployment(d *Decision, u float64) int {
	picked, last := -1, -1
	cum := 0.0
	for k := range d.Deployments {
		pk := d.Deployments[k].Probability
		if pk == 0 {
			continue
		}
		last = k
		cum += pk
		if u < cum {
			picked = k
			break
		}
	}
	if picked < 0 {
		picked = last
	}
	return picked
}
