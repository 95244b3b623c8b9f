package scheduler

import "math"

// saturation finishes a decision in which no instance is eligible. When
// none was excluded for load (ReasonKVFull, ReasonQueueFull) the pool is
// down: ErrNoEligibleInstance. Otherwise it is saturated: d.DrainMs is the
// least expected drain time of those instances (QueueMs − MaxQueueMs for
// queue_full, QueueMs for kv_full), and
//
//   - under SaturationShed or SaturationQueue (the router then holds the
//     pick back), or when none of them is in a deployment with
//     weight > 0, it returns ErrSaturated;
//   - under SaturationLeastLoaded it makes both draws (the RNG contract:
//     two draws per success; they do not affect the choice) and picks the
//     instance of least CostMs among them in deployments with weight > 0,
//     the first in snapshot order on a tie. That instance's Reason becomes
//     ReasonNone (and leaves d.Excluded), its P(i|d) and Joint 1, its
//     deployment's Reason ReasonNone and P(d) 1; every other instance keeps
//     its reason. d.Saturated is set.
func saturation(p *Policy, snap *Snapshot, rng RNG, d *Decision) error {
	if d.Excluded[ReasonKVFull]+d.Excluded[ReasonQueueFull] == 0 {
		return ErrNoEligibleInstance
	}
	best := -1
	drain := math.Inf(1)
	for i := range snap.Instances {
		r := &d.Instances[i]
		var t float64
		switch r.Reason {
		case ReasonKVFull:
			t = r.QueueMs
		case ReasonQueueFull:
			t = r.QueueMs - p.MaxQueueMs
		default:
			continue
		}
		drain = min(drain, t)
		if snap.Deployments[snap.Instances[i].Deployment].Weight > 0 &&
			(best < 0 || r.CostMs < d.Instances[best].CostMs) {
			best = i
		}
	}
	d.DrainMs = drain
	if p.OnSaturation != SaturationLeastLoaded || best < 0 {
		return ErrSaturated
	}
	d.DeploymentDraw = rng.Float64()
	d.InstanceDraw = rng.Float64()
	r := &d.Instances[best]
	d.Excluded[r.Reason]--
	r.Reason, r.Probability, r.Joint = ReasonNone, 1, 1
	k := snap.Instances[best].Deployment
	d.Deployments[k].Reason, d.Deployments[k].Probability = ReasonNone, 1
	d.Deployment, d.Instance, d.Saturated = k, best, true
	return nil
}

// held ends a decision whose draw chose the Held deployment dep (no
// eligible instance, some full, under SaturationQueue): d.HeldDeployment
// is dep, d.DrainMs the least drain time of its full instances (as
// saturation computes it), and every P(i|d) is normalised for the audit
// (dep's instances keep P(i|d) 0). It returns ErrDeploymentSaturated.
func held(p *Policy, snap *Snapshot, d *Decision, dep int) error {
	drain := math.Inf(1)
	for i := range snap.Instances {
		if snap.Instances[i].Deployment != dep {
			continue
		}
		switch r := &d.Instances[i]; r.Reason {
		case ReasonKVFull:
			drain = min(drain, r.QueueMs)
		case ReasonQueueFull:
			drain = min(drain, r.QueueMs-p.MaxQueueMs)
		}
	}
	d.HeldDeployment, d.DrainMs = dep, drain
	normalise(snap, d, -1, 0)
	return ErrDeploymentSaturated
}
