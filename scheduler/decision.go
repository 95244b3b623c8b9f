package scheduler

import (
	"strconv"
	"strings"
)

// DeploymentResult is the audit of one deployment in a Decision. It is a
// plain value.
type DeploymentResult struct {
	// Weight is w_d as used.
	Weight float64
	// MatchedBlocks is the longest matched prefix over the deployment's
	// eligible instances (its full ones when Held; clamped to
	// Request.Blocks; 0 when none is eligible); HitRatio is MatchedBlocks / Request.Blocks (0 when Blocks
	// is 0).
	MatchedBlocks int
	HitRatio      float64
	// LoadMs is L_d, the deployment's queueing cost (soft-min over its
	// eligible instances' QueueMs + BatchWaitMs, its full ones' when Held),
	// when the load term is on and the deployment has an eligible instance
	// or is Held; 0 otherwise.
	LoadMs float64
	// Eligible counts the deployment's instances that passed the
	// eligibility checks.
	Eligible int
	// Full counts its live instances excluded only for load (ReasonKVFull,
	// ReasonQueueFull).
	Full int
	// Held is true when the deployment has no eligible instance but some
	// full ones and the policy is SaturationQueue: it still takes part in
	// the draw, by its weight, with MatchedBlocks and LoadMs over its full
	// instances, so that a full deployment keeps its share instead of
	// spilling onto the others. Drawn, Decide returns
	// ErrDeploymentSaturated.
	Held bool
	// Probability is P(d).
	Probability float64
	// Reason is ReasonNone when the deployment takes part in the draw (a
	// Held one included); otherwise ReasonUnweighted, ReasonZeroWeight or
	// ReasonNoEligibleInstance, checked in that order.
	Reason Reason
}

// InstanceResult is the audit of one instance in a Decision. It is a plain
// value.
type InstanceResult struct {
	// CostMs = PrefillWeight × PrefillMs + QueueMs + BatchWaitMs, the
	// decision cost S_i (Decision.PrefillWeight; 1 gives the predicted
	// TTFT, PrefillMs + QueueMs + BatchWaitMs). The cost parts are filled
	// for every instance, excluded ones included.
	CostMs      float64
	PrefillMs   float64
	QueueMs     float64
	BatchWaitMs float64
	// UncachedTokens is the prompt tokens left to prefill on this instance.
	UncachedTokens uint32
	// WorkTokens is their prefill work in tokens at an empty context
	// (PrefillWork of UncachedTokens on the cached rest, rounded): the work
	// to add to the chosen instance's queue (optimistic accounting, the
	// ledger, the rate of picked work).
	WorkTokens uint32
	// Probability is P(i|d), filled for the instances of every deployment
	// with an eligible instance (drawn or not, weight 0 included); Joint is
	// P(d)*P(i|d), so the Joints of the pool sum to 1.
	Probability float64
	Joint       float64
	// Reason is ReasonNone when the instance took part in the model (its
	// deployment may not have been drawn); otherwise the eligibility or
	// strategy reason for its probability 0.
	Reason Reason
	// ShortLane is true when the instance is in its deployment's short
	// lane (Policy.ShortLanes, lanes.go).
	ShortLane bool
}

// Decision is the outcome of Decide with its full audit. Its zero value is
// ready to use. Reuse one Decision across calls to avoid allocation: Decide
// resizes its slices in place and allocates only when their capacity is too
// small. A Decision is not safe for concurrent use; give each goroutine its
// own.
type Decision struct {
	// Deployment and Instance are indexes into the Snapshot; -1 when Decide
	// returned an error.
	Deployment int
	Instance   int
	// DeploymentDraw and InstanceDraw are the two RNG draws, normally in
	// [0,1); 0 when not drawn. The deployment (then the instance) chosen is
	// the first positive-probability entry whose cumulative probability
	// exceeds the draw; a draw beyond the last cumulative sum (rounding, or
	// an RNG outside [0,1), NaN included) picks the last positive-probability
	// entry.
	DeploymentDraw float64
	InstanceDraw   float64
	// Saturated is true when no instance was eligible, some were excluded
	// only for load, and Policy.OnSaturation = SaturationLeastLoaded made
	// Decide pick the cheapest of those: the chosen instance keeps its
	// ReasonKVFull / ReasonQueueFull (the others theirs), its P(i|d) and
	// Joint are 1, its deployment's P(d) is 1.
	Saturated bool
	// DrainMs, when the pool is saturated (Saturated, or ErrSaturated), is
	// the least expected drain time over the instances excluded for load:
	// QueueMs − MaxQueueMs for a queue_full instance (until it is back
	// under the limit), QueueMs for a kv_full one (until its queued prefill
	// work is done). 0 otherwise.
	DrainMs float64
	// HeldDeployment is the drawn deployment when Decide returned
	// ErrDeploymentSaturated (DrainMs is then over its instances); -1
	// otherwise.
	HeldDeployment int
	// PrefillWeight is the weight of every instance's PrefillMs in its
	// CostMs: Request.PrefillWeight, 1 when that is 0.
	PrefillWeight float64
	// TTFTTargetMs is Request.TTFTTargetMs (0: none). SLOMet, when there is
	// a target and a choice, is whether the chosen instance's predicted
	// TTFT is at or under it. SLOBestMs, on ErrSLOUnattainable, is the least
	// predicted TTFT of the eligible instances of the deployments with
	// P(d) > 0; 0 otherwise.
	TTFTTargetMs float64
	SLOMet       bool
	SLOBestMs    float64
	// Deployments and Instances parallel Snapshot.Deployments and
	// Snapshot.Instances.
	Deployments []DeploymentResult
	Instances   []InstanceResult
	// PD is the prefill stage (decidePD): whether the request prefills on
	// a prefill instance of the drawn deployment, and which.
	PD PDResult
	// Excluded counts instances by their InstanceResult.Reason: the
	// eligibility reasons and ReasonThreshold / ReasonNotMinimum. The entries
	// for ReasonNone and the deployment reasons stay 0.
	Excluded [NumReasons]int

	// deps is per-deployment scratch, parallel to Deployments.
	deps []depState
	// prefills is the prefill stage's scratch: the eligible prefill
	// instances of the drawn deployment.
	prefills []int32
}

// depState is the per-deployment scratch of one Decide call.
type depState struct {
	minCost float64 // S_min over the eligible instances
	minLoad float64 // min of QueueMs+BatchWaitMs over the eligible instances
	maxLoad float64 // max of QueueMs+BatchWaitMs over the eligible instances
	// The same over the full instances (ReasonKVFull, ReasonQueueFull):
	// what a Held deployment is drawn by.
	fullMatched          int
	fullMinLoad, fullMax float64
	loadSum              float64 // sum of 2^(-(q-minLoad)/DeploymentDeltaMs)
	norm                 float64 // sum of the instances' unnormalised weights
	inv                  float64 // 1/norm
	logit                float64 // log2 of P(d)/w_d, then of P(d), up to a constant
	// With a TTFT target (noteSLO): eligible instances counted, those
	// predicted to meet it, their least cost, the least predicted TTFT.
	slo, meets           int
	minMeetCost, minTTFT float64
	// The short lane (lanes.go): the smallest LaneKeys of the
	// deployment's lane candidates, ascending (laneN of them, at most
	// Policy.ShortLanes + 1), and laneCut, the largest key in the lane
	// (lanes 0 when the deployment has no instance to spare). Of the
	// eligible instances the lane does not refuse the request: how many,
	// and their least cost, over all (kept, minKept) and over those
	// predicted to meet the TTFT target (keptMeet, minKeptMeet).
	laneKeys             [MaxShortLanes + 1]uint64
	laneN                int
	laneCut              uint64
	lanes                bool
	kept, keptMeet       int
	minKept, minKeptMeet float64
}

// reset empties d for a snapshot of nd deployments and ni instances.
func (d *Decision) reset(nd, ni int) {
	d.Deployment, d.Instance = -1, -1
	d.DeploymentDraw, d.InstanceDraw = 0, 0
	d.Saturated, d.DrainMs, d.HeldDeployment = false, 0, -1
	d.PrefillWeight = 1
	d.TTFTTargetMs, d.SLOMet, d.SLOBestMs = 0, false, 0
	d.PD = PDResult{Prefill: -1}
	d.Excluded = [NumReasons]int{}
	d.Deployments = resize(d.Deployments, nd)
	// Decide's first pass writes every field of every instance result.
	if cap(d.Instances) < ni {
		d.Instances = make([]InstanceResult, ni)
	}
	d.Instances = d.Instances[:ni]
	d.deps = resize(d.deps, nd)
}

// resize returns s with length n and every element zeroed, reusing s's
// storage when its capacity suffices.
func resize[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	s = s[:n]
	clear(s)
	return s
}

// ExcludedSummary returns the non-zero Excluded counts in Reason order, e.g.
// "3 stale, 1 draining", or "" when there are none. It allocates; meant for
// error messages and logs.
func (d *Decision) ExcludedSummary() string {
	var b strings.Builder
	for r, n := range d.Excluded {
		if n == 0 || Reason(r) == ReasonNone {
			continue
		}
		if b.Len() > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.Itoa(n))
		b.WriteByte(' ')
		b.WriteString(Reason(r).String())
	}
	return b.String()
}
