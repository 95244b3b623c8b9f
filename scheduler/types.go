package scheduler

import (
	"errors"
	"time"
)

// RNG is the source of randomness for a decision. *math/rand/v2.Rand satisfies
// it. Float64 should return a value in [0, 1); Decide tolerates any value (see
// Decision.DeploymentDraw). Decide calls it exactly twice per successful
// decision: first for the deployment, then for the instance, and a third
// time only for a disaggregated pick, for the prefill instance
// (Decision.PD); it does not call it at all when it returns an error
// (except a prefill-stage error, after the first two). An RNG is used by one Decide at a time:
// give each goroutine its own (a *rand.Rand is not safe for concurrent use).
type RNG interface {
	Float64() float64
}

// Request is what Decide needs to know about one request. It is a plain value.
type Request struct {
	// PromptTokens is the prompt length in tokens.
	PromptTokens uint32
	// Blocks is the number of chained block hashes the request carries. The
	// hit ratio of a deployment is its best eligible instance's MatchedBlocks
	// / Blocks; 0 when Blocks is 0. Must be >= 0.
	Blocks int
	// ChosenOnly limits the instance level to the deployment drawn: Decide
	// computes P(i|d), Joint and the strategy reasons (ReasonThreshold,
	// ReasonNotMinimum, and their Excluded counts) only for its instances.
	// Every other field of the Decision — the choice, both draws, the whole
	// deployment level, every instance's cost parts and eligibility reason —
	// is exactly what a full Decide gives; the other deployments' instances
	// keep Probability and Joint 0. For callers that report only the chosen
	// instance (AUDIT_LEVEL_CHOSEN); false gives the full audit.
	ChosenOnly bool
	// PrefillWeight weighs the prefill term of every instance's cost:
	// CostMs = PrefillWeight × PrefillMs + QueueMs + BatchWaitMs. 0 or 1
	// is the model's cost exactly; the caller may set it above 1 when the
	// fleet is backlogged, so that work a miss adds (which delays every
	// request queued after it) counts for more than this request's own
	// wait. Must be 0 or finite and >= 1.
	PrefillWeight float64
	// TTFTTargetMs is the request's TTFT target in ms; 0 means none. Inside
	// every deployment, instances predicted (InstanceResult.PredictedTTFTMs)
	// to miss it get probability 0 (ReasonSLOMiss) when one meets it, and
	// the strategy runs among those that meet it; when no eligible instance
	// of a deployment with P(d) > 0 meets it, Policy.OnSLOMiss decides
	// (ErrSLOUnattainable under SLOShed). Must be 0 or in (0,
	// MaxTTFTTargetMs].
	TTFTTargetMs float64
}

// Deployment is one deployment of the pool as the caller sees it. It is a
// plain value.
type Deployment struct {
	// Name identifies the deployment in the audit and in error messages.
	Name string
	// Weight is the operator's weight w_d: finite and >= 0. 0 drains the
	// deployment. Only ratios of weights matter.
	Weight float64
	// Unweighted is true when the pool has weights configured but none for
	// this deployment: its Weight is then 0 and the audit says why
	// (ReasonUnweighted). It has no effect when Weight > 0.
	Unweighted bool
	// Calibration is the deployment's fitted prefill model; the zero value
	// (Version 0) is the policy's prior.
	Calibration Calibration
}

// Instance is one model-server instance as the caller sees it at decision
// time. All load figures are the latest report's, except AssignedTokens and
// AssignedKVUsage. It is a plain value. Every float must be finite and >= 0,
// every int >= 0, ReportAge >= 0, or Decide returns ErrInvalidSnapshot.
type Instance struct {
	// ID identifies the instance in the audit and in error messages.
	ID string
	// Deployment is the index of the instance's deployment in
	// Snapshot.Deployments.
	Deployment int
	// MatchedBlocks is the number of the request's block hashes, from the
	// first, cached on this instance. Values above Request.Blocks count as
	// Request.Blocks.
	MatchedBlocks int
	// BlockSizeTokens is the instance's KV block size; 0 means
	// Policy.BlockSizeTokens.
	BlockSizeTokens uint32
	// PrefillTokensPerSecond is the instance's prefill throughput; 0 means
	// Policy.DefaultPrefillTokensPerSecond.
	PrefillTokensPerSecond float64
	// QueueMs is the instance's own estimate of its queued and running
	// prefill work in ms; used only when HasQueueMs (declared with the
	// flags below, where it packs with them).
	QueueMs float64
	// QueuedPrefillTokens is the prefill work queued or running on the
	// instance, in tokens; used when HasQueueMs is false.
	QueuedPrefillTokens uint64
	// AssignedTokens is the prefill work the router assigned to the instance
	// since its last report (optimistic accounting), in tokens.
	AssignedTokens uint64
	// KVUsage is the fraction of the instance's KV blocks in use by running
	// requests (vLLM's kv_cache_usage_perc), normally 0..1 (values above 1
	// are accepted and count as full). It is not prefix-cache occupancy: a
	// cache full of evictable blocks is not in use and must report low.
	KVUsage float64
	// AssignedKVUsage is the fraction of the instance's KV blocks that the
	// picks the router assigned to it since its last report will take
	// (AssignedKVUsage of the KVBlocks of their uncached tokens); the
	// kv_full check reads KVUsage + AssignedKVUsage, so KV-bound pools do
	// not overshoot between reports. 0 when not projected.
	AssignedKVUsage float64
	// ReportAge is the time since the instance's last report.
	ReportAge time.Duration
	// HasQueueMs is true when QueueMs is the instance's own estimate;
	// otherwise QueuedPrefillTokens is used.
	HasQueueMs bool
	// Disconnected is true when the instance's report stream is closed.
	Disconnected bool
	// Draining is true when the instance said it is draining.
	Draining bool
	// Unreachable is true when a gateway reported a failed connect to the
	// instance and it has not served or reported since its back-off.
	Unreachable bool
	// Excluded is true when the request excludes this instance (a retry).
	Excluded bool
	// Role is the instance's role under prefill/decode disaggregation
	// (RoleBoth, the zero value, is an aggregated instance). A RolePrefill
	// instance is never the pick's instance (ReasonPrefillRole); the
	// prefill stage may choose it (Decision.PD).
	Role Role
	// LaneKey places the instance in its deployment's short lane: the
	// Policy.ShortLanes lane candidates with the smallest keys form it.
	// Set it to LaneKey(ID), so every replica forms the same lane.
	LaneKey uint64
	// RunningRequests is the number of requests the instance last reported
	// running (decoding or prefilling). The prefill stage charges a local
	// prefill's stall of these decodes (Policy.PDInterferenceWeight).
	RunningRequests uint32
}

// Snapshot is the pool's state for one decision. Decide only reads it, so one
// Snapshot may be shared by concurrent Decide calls as long as nobody writes
// to it meanwhile.
type Snapshot struct {
	Deployments []Deployment
	Instances   []Instance
}

// Errors returned by Decide and Policy.Validate, possibly wrapped with detail:
// test them with errors.Is. When Decide fails, the Decision is filled in as
// far as it got (see Decide), so the caller can report counts of exclusion
// reasons.
var (
	// ErrNoInstances: the snapshot has no instance.
	ErrNoInstances = errors.New("scheduler: pool has no instances")
	// ErrNoEligibleInstance: every instance failed the eligibility checks.
	ErrNoEligibleInstance = errors.New("scheduler: no eligible instance")
	// ErrSaturated: no instance is eligible and at least one was excluded
	// only for load (ReasonKVFull or ReasonQueueFull), under
	// Policy.OnSaturation = SaturationShed. Decision.DrainMs is the
	// earliest such instance's expected drain time. (Under
	// SaturationLeastLoaded, Decide picks instead; see Decision.Saturated.)
	ErrSaturated = errors.New("scheduler: every live instance is saturated")
	// ErrDeploymentSaturated (it matches ErrSaturated too): under
	// SaturationQueue the deployment drawn has no eligible instance, only
	// full ones, while another deployment has room
	// (DeploymentResult.Held). The router holds the pick until that
	// deployment frees rather than send it to another deployment beyond
	// the weights. Decision.HeldDeployment is the deployment,
	// Decision.DrainMs its earliest drain time.
	ErrDeploymentSaturated error = deploymentSaturated{}
	// ErrAllWeightsZero: eligible instances exist, but only in deployments
	// whose weight is 0 (the pool is drained).
	ErrAllWeightsZero = errors.New("scheduler: every deployment with eligible instances has weight 0")
	// ErrInvalidSnapshot: an instance names a deployment index out of range,
	// a figure of the snapshot or the request is NaN, infinite or negative,
	// or an instance's cost overflows. The wrapping error names the instance
	// (or deployment) and the field.
	ErrInvalidSnapshot = errors.New("scheduler: invalid snapshot")
	// ErrInvalidPolicy: Policy.Validate (which Decide also runs) rejected the
	// policy. The wrapping error names the field by its proto name, e.g.
	// "delta_ms must be > 0, got -1".
	ErrInvalidPolicy = errors.New("scheduler: invalid policy")
	// ErrInvalidArgument: Decide was given a nil *Decision or a nil RNG.
	ErrInvalidArgument = errors.New("scheduler: invalid argument")
)

// deploymentSaturated is ErrDeploymentSaturated: its own message, and a
// match for ErrSaturated (errors.Is) so that every caller that holds or
// sheds a saturated pick treats it alike.
type deploymentSaturated struct{}

func (deploymentSaturated) Error() string {
	return "scheduler: the drawn deployment is saturated (its instances are full; others have room)"
}

func (deploymentSaturated) Is(target error) bool { return target == ErrSaturated }
