package scheduler

import "fmt"

// Decide chooses an instance for req among snap's instances under policy p,
// with two draws from rng, and writes the choice and its full audit into d.
// It returns nil, or an error matching (errors.Is) one of the sentinels:
//
//   - ErrInvalidArgument: d or rng is nil (d is left untouched when nil);
//   - ErrInvalidPolicy: p fails Policy.Validate (Decide runs it);
//   - ErrNoInstances: snap is nil or has no instance;
//   - ErrInvalidSnapshot: a bad deployment index or a NaN, infinite or
//     negative figure; the error names the instance or deployment and field;
//   - ErrNoEligibleInstance: every instance failed an eligibility check,
//     none of them only for load;
//   - ErrSaturated: no instance is eligible, some only for load (kv_full,
//     queue_full), and p.OnSaturation is SaturationShed, or no such instance
//     is in a deployment with weight > 0 (see saturation);
//   - ErrDeploymentSaturated (matches ErrSaturated too): under
//     SaturationQueue the draw chose a Held deployment, one whose live
//     instances are all full while other deployments have room (see held);
//   - ErrAllWeightsZero: eligible instances exist, only in weight 0
//     deployments;
//   - ErrSLOUnattainable: the request's TTFT target is met by no eligible
//     instance of a deployment with P(d) > 0 and p.OnSLOMiss is SLOShed
//     (see slo.go); d.SLOBestMs is the least predicted TTFT.
//
// The steps, each described where it is implemented:
//
//  1. every instance: validation, cost parts (cost), eligibility reason in
//     the order of the Reason constants; d.Excluded counts the reasons;
//  2. every deployment: weight, hit ratio, optional load term, reason and
//     P(d) (deploymentLevel);
//  3. every deployment with an eligible instance (only the drawn one when
//     req.ChosenOnly): P(i|d) under p.Strategy and Joint (instanceWeights,
//     normalise);
//  4. the first draw picks the deployment by cumulative P(d), the second the
//     instance by cumulative P(i|d) (see Decision.DeploymentDraw);
//  5. when the pool has RolePrefill instances, the prefill stage (decidePD,
//     Decision.PD): whether a prefill instance of the drawn deployment
//     pays, and a third draw to choose it when it does. ErrNoPrefillInstance
//     and ErrPrefillSaturated come from this stage under PDFallbackFail.
//
// When no instance is eligible but some were excluded only for load, the
// pool is saturated: under SaturationLeastLoaded Decide makes both draws
// and picks the cheapest of those (d.Saturated), else it returns
// ErrSaturated; d.DrainMs says when the first of them should drain.
//
// On error d.Deployment = d.Instance = -1, no draw is made (but for
// ErrDeploymentSaturated: the deployment draw), and d holds what
// was computed before the error: for ErrNoEligibleInstance, ErrSaturated and
// ErrAllWeightsZero the whole audit (with every P(d) 0), for
// ErrInvalidSnapshot the instances before the bad one.
//
// Decide does not allocate when d's slices have the capacity for the
// snapshot (reuse d), except on the error path. It never panics, whatever
// the figures. It is safe for concurrent use as long as each call has its
// own d and rng; p and snap are only read and may be shared.
func Decide(p *Policy, req Request, snap *Snapshot, rng RNG, d *Decision) error {
	if d == nil {
		return fmt.Errorf("%w: nil *Decision", ErrInvalidArgument)
	}
	if snap == nil {
		snap = &Snapshot{}
	}
	d.reset(len(snap.Deployments), len(snap.Instances))
	if err := precheck(p, &req, snap, rng); err != nil {
		clear(d.Instances) // reset leaves them to the first pass
		return err
	}
	d.PrefillWeight = max(1, req.PrefillWeight)
	d.TTFTTargetMs = req.TTFTTargetMs
	eligible, err := assess(p, &req, snap, d)
	if err != nil {
		return err
	}
	participating := deploymentLevel(p, &req, snap, d, true)
	if len(snap.Instances) == 0 {
		return ErrNoInstances
	}
	if eligible == 0 {
		if err := saturation(p, snap, rng, d); err != nil {
			return err
		}
		if err := decidePD(p, snap, rng, d); err != nil {
			return err
		}
		d.setSLOMet()
		return nil
	}
	if participating == 0 {
		instanceWeights(p, snap, d, -1)
		normalise(snap, d, -1, 0)
		return ErrAllWeightsZero
	}
	if !req.ChosenOnly {
		instanceWeights(p, snap, d, -1)
	}
	if req.TTFTTargetMs > 0 && p.OnSLOMiss == SLOShed && !sloAttainable(d) {
		if req.ChosenOnly {
			instanceWeights(p, snap, d, -1)
		}
		normalise(snap, d, -1, 0)
		return ErrSLOUnattainable
	}
	d.DeploymentDraw = rng.Float64()
	dep := pickDeployment(d, d.DeploymentDraw)
	if dep >= 0 && d.Deployments[dep].Held {
		return held(p, snap, d, dep)
	}
	if req.ChosenOnly && dep >= 0 {
		instanceWeights(p, snap, d, dep)
	}
	d.InstanceDraw = rng.Float64()
	inst := normalise(snap, d, dep, d.InstanceDraw)
	if dep < 0 || inst < 0 {
		// Unreachable: some participating deployment has P(d) > 0 (the
		// terms sum to >= 2^-900, or the log-space path gives the largest
		// one 1), and the cheapest eligible instance of any deployment has
		// P(i|d) >= 1/n.
		return fmt.Errorf("%w: internal error: no positive probability (deployment %d, instance %d)",
			ErrNoEligibleInstance, dep, inst)
	}
	d.Deployment, d.Instance = dep, inst
	if err := decidePD(p, snap, rng, d); err != nil {
		return err
	}
	d.setSLOMet()
	return nil
}

// precheck validates everything but the instances.
func precheck(p *Policy, req *Request, snap *Snapshot, rng RNG) error {
	if err := p.Validate(); err != nil {
		return err
	}
	if rng == nil {
		return fmt.Errorf("%w: nil RNG", ErrInvalidArgument)
	}
	if err := checkRequest(req); err != nil {
		return err
	}
	return checkDeployments(snap)
}
