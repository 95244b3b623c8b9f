package scheduler

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Strategy is the instance-level rule that turns costs into probabilities. It
// is a plain value, safe for concurrent use.
type Strategy uint8

const (
	// Softmax gives p_i proportional to 2^(-S_i/DeltaMs). The default.
	Softmax Strategy = iota
	// Threshold keeps instances with S_i - S_min <= max(ThresholdRatio*S_min,
	// ThresholdMinMs) and chooses uniformly among them (RTP-LLM FlexLB).
	Threshold
	// Argmin chooses the lowest cost, splitting exact ties evenly.
	Argmin
	numStrategies
)

var strategyNames = [numStrategies]string{
	Softmax:   "softmax",
	Threshold: "threshold",
	Argmin:    "argmin",
}

// String returns "softmax", "threshold" or "argmin", and "Strategy(N)" for an
// unknown value.
func (s Strategy) String() string { return nameOf(strategyNames[:], int(s), "Strategy") }

// ParseStrategy parses "softmax", "threshold" or "argmin" (case and
// surrounding spaces ignored). Any other string gives an error wrapping
// ErrInvalidPolicy.
func ParseStrategy(s string) (Strategy, error) {
	if i, ok := lookupName(strategyNames[:], s); ok {
		return Strategy(i), nil
	}
	return Softmax, fmt.Errorf("%w: strategy must be softmax, threshold or argmin, got %q", ErrInvalidPolicy, s)
}

// nameOf returns names[i], or kind(i) when i is out of range.
func nameOf(names []string, i int, kind string) string {
	if i >= 0 && i < len(names) {
		return names[i]
	}
	return kind + "(" + strconv.Itoa(i) + ")"
}

// lookupName returns the index of s in names, case and surrounding spaces
// ignored.
func lookupName(names []string, s string) (int, bool) {
	t := strings.TrimSpace(s)
	for i, name := range names {
		if strings.EqualFold(t, name) {
			return i, true
		}
	}
	return 0, false
}

// Saturation is what Decide does when no instance is eligible and some
// were excluded only for load (kv_full or queue_full): the pool is
// saturated rather than down. A plain value, safe for concurrent use.
type Saturation uint8

const (
	// SaturationLeastLoaded picks the cheapest (least CostMs) saturated
	// instance of a deployment with weight > 0 and marks the decision
	// Saturated. The default.
	SaturationLeastLoaded Saturation = iota
	// SaturationShed returns ErrSaturated so that the caller sheds the
	// request.
	SaturationShed
	// SaturationQueue returns ErrSaturated like SaturationShed; the router
	// then holds the pick in the pool's waiting room (internal/flowq) until
	// capacity frees or its deadline passes (flow control,
	// docs/flow-control.md).
	SaturationQueue
	numSaturations
)

var saturationNames = [numSaturations]string{
	SaturationLeastLoaded: "least_loaded",
	SaturationShed:        "shed",
	SaturationQueue:       "queue",
}

// String returns "least_loaded", "shed" or "queue", and "Saturation(N)" for an
// unknown value.
func (s Saturation) String() string { return nameOf(saturationNames[:], int(s), "Saturation") }

// ParseSaturation parses "least_loaded", "shed" or "queue" (case and surrounding
// spaces ignored). Any other string gives an error wrapping
// ErrInvalidPolicy.
func ParseSaturation(s string) (Saturation, error) {
	if i, ok := lookupName(saturationNames[:], s); ok {
		return Saturation(i), nil
	}
	return SaturationLeastLoaded, fmt.Errorf("%w: on_saturation must be least_loaded, shed or queue, got %q", ErrInvalidPolicy, s)
}

// Policy holds every scheduling parameter of a pool. The zero value is not
// valid; start from DefaultPolicy. A Policy is a plain value: safe to copy,
// safe for concurrent reads (Decide only reads it). Every field has a range,
// stated on it and enforced by Validate; the bounds are the Min*/Max*
// constants of policy_range.go.
type Policy struct {
	// Strategy is the instance-level rule. Default Softmax. One of softmax,
	// threshold, argmin.
	Strategy Strategy
	// LambdaH is the hit-ratio bias of the deployment level: each +1/LambdaH
	// of hit ratio doubles a deployment's odds. 0 turns the bias off.
	// Default 10. Range [0, 100].
	LambdaH float64
	// DeltaMs is the softmax decay: every DeltaMs of extra cost halves an
	// instance's odds. Default 20. Range [0.001, 1000000] ms.
	DeltaMs float64
	// ThresholdRatio and ThresholdMinMs set the Threshold band
	// max(ThresholdRatio*S_min, ThresholdMinMs). Defaults 0.1 and 20 ms.
	// Ranges [0, 10] and [0, 1000000] ms.
	ThresholdRatio float64
	ThresholdMinMs float64
	// BatchWaitMs is the router-side batching wait added to every cost.
	// Default 0. Range [0, 60000] ms.
	BatchWaitMs float64
	// BlockSizeTokens is the KV block size of instances that do not report
	// one. Default 16. Range [1, 1048576] tokens, the limit of a load
	// report's block_size_tokens.
	BlockSizeTokens uint32
	// DefaultPrefillTokensPerSecond is the prefill throughput of instances
	// that do not report one. Default 10000. Range [1, 100000000] tokens/s.
	DefaultPrefillTokensPerSecond float64
	// DoublingContextTokens is C of the prefill model (PrefillMs): the
	// context, cached and new tokens before a new one, at which a new
	// token's prefill costs double its cost on an empty context. Default
	// DefaultDoublingContextTokens (17,000, an 8B model on an H200); 0
	// turns the attention term off (cached tokens free, the linear model).
	// 0 or in [256, 100000000] tokens. Pool-wide: see docs/model.md.
	DoublingContextTokens float64
	// MaxKVUsage excludes instances whose KV usage is at or over it.
	// Default 0.95. Range (0, 1]; 1 excludes only a completely full cache.
	MaxKVUsage float64
	// MaxQueueMs excludes instances whose queue_ms is over it. Default 0:
	// off. Range [0, 600000] ms.
	MaxQueueMs float64
	// DeploymentDeltaMs turns on the deployment-level load term: every
	// DeploymentDeltaMs of extra queueing (soft-min over the deployment's
	// eligible instances, relative to the least-loaded deployment) halves a
	// deployment's odds. Default 0: off, and the seed's formula holds exactly.
	// 0 or in [0.001, 1000000] ms.
	DeploymentDeltaMs float64
	// StaleAfter excludes instances whose last report is older. Default 2s.
	// Range [10ms, 1h].
	StaleAfter time.Duration
	// ForgetAfter is how long the state layer keeps a disconnected instance,
	// or one silent on an open stream, and its cache entries. Default 30s.
	// Range [StaleAfter, 24h]. Not used by Decide.
	ForgetAfter time.Duration
	// DefaultKVCapacityBlocks bounds the approximate prefix index of an
	// instance that reports no kv_capacity_blocks. Default 16384. Range
	// [1, 1073741824] blocks; the state layer further caps it at its
	// MaxBlocksPerInstance limit. Not used by Decide.
	DefaultKVCapacityBlocks uint64
	// OnSaturation is what Decide does when every live instance is excluded
	// for load. Default SaturationLeastLoaded.
	OnSaturation Saturation
	// OnSLOMiss is what Decide does when a request's TTFT target
	// (Request.TTFTTargetMs) is met by no eligible instance of a
	// deployment with P(d) > 0. Default SLOBestEffort.
	OnSLOMiss SLOMiss
	// Calibration says whether a deployment's fitted prefill model
	// (Deployment.Calibration) prices its instances. Default
	// CalibrationApply.
	Calibration CalibrationMode
	// PDMinUncachedTokens: a pick considers a prefill instance only when
	// at least max(1, PDMinUncachedTokens) prompt tokens are uncached on
	// the chosen decode instance. Default 512. Range [0, 10000000]
	// tokens. Read only for deployments with RolePrefill instances.
	PDMinUncachedTokens uint32
	// PDTransferMsPerToken is the KV transfer time from a prefill instance
	// to the decode one per uncached token. Default 0.005 ms (128 KiB of
	// KV a token, an 8B model in bf16, over 25 GB/s). Range [0, 1000] ms.
	PDTransferMsPerToken float64
	// PDFallback is what a pick does when it would use a prefill instance
	// and none is eligible. Default PDFallbackLocal.
	PDFallback PDFallback
	// PDInterferenceWeight is the TTFT, in ms, that one ms of stall on one
	// running decode is worth: a local prefill of PrefillMs on a decode
	// instance running R requests costs LocalMs + PDInterferenceWeight ×
	// R × PrefillMs against RemoteMs (PDResult.InterferenceMs). Default
	// 0.1, 0 = off (TTFT only). Range [0, 100].
	PDInterferenceWeight float64
	// PDDecodeRunningMs is added to a RoleDecode instance's CostMs per
	// running request it reports (Instance.RunningRequests): the decode
	// level's price of a busier decode batch, in ms; 0 is off. Default
	// DefaultPDDecodeRunningMs (5 ms), range [0, 1000] ms.
	PDDecodeRunningMs float64
	// PDMode says which picks go to a prefill instance: PDConditional
	// (when it pays; the default) or PDAlways (every pick, for decode
	// engines that never prefill).
	PDMode PDMode
	// ShortLanes is how many instances of each deployment form its short
	// lane: they take no request whose prefill on them exceeds
	// ShortLaneMaxPrefillMs while another instance of the deployment can
	// take it (ReasonShortLane), so a short prompt always finds instances
	// that no long one occupies (lanes.go). 0, the default, is off. Range
	// [0, 8]; a deployment keeps at least one instance out of its lane.
	ShortLanes uint32
	// ShortLaneMaxPrefillMs is the longest prefill, in ms, the short lane
	// takes. Default 400 ms. Range [1, 1000000] ms.
	ShortLaneMaxPrefillMs float64
	// QueueTTL is the longest a pick waits under SaturationQueue (the
	// call's own deadline, when earlier, wins). Default 30s. Range
	// [10ms, 10m].
	QueueTTL time.Duration
	// QueueMaxWaiting is the most picks waiting for the pool in one router
	// under SaturationQueue; the next is refused (queue_full). Default
	// 1000. Range [1, 100000].
	QueueMaxWaiting uint32
	// QueueMaxPerBand is the most picks waiting in one priority band of
	// the pool in one router. Default 1000. Range [1, 100000].
	QueueMaxPerBand uint32
	// DispatchSpacingMs is the least time, in ms, between a router's
	// answers to two picks for one instance, so a gateway's requests reach
	// the instance's queue in the order they were picked (pace.go,
	// DispatchHold). A pick is held only as long as the queue it was
	// priced behind. Set it above the gateway's jitter from a pick's
	// answer to its request reaching the engine (its p99), and well under
	// the gap between requests to one instance at peak: while its queue
	// lasts, picks for one instance are answered at most one per spacing.
	// Default 0: off. Range [0, 1000] ms.
	DispatchSpacingMs float64
}

// DefaultPolicy returns the defaults stated on each Policy field. It is safe
// for concurrent use.
func DefaultPolicy() Policy {
	return Policy{
		Strategy:                      Softmax,
		LambdaH:                       10,
		DeltaMs:                       20,
		ThresholdRatio:                0.1,
		ThresholdMinMs:                20,
		BatchWaitMs:                   0,
		BlockSizeTokens:               16,
		DefaultPrefillTokensPerSecond: 10000,
		DoublingContextTokens:         DefaultDoublingContextTokens,
		MaxKVUsage:                    0.95,
		MaxQueueMs:                    0,
		DeploymentDeltaMs:             0,
		StaleAfter:                    2 * time.Second,
		ForgetAfter:                   30 * time.Second,
		DefaultKVCapacityBlocks:       16384,
		OnSaturation:                  SaturationLeastLoaded,
		OnSLOMiss:                     SLOBestEffort,
		Calibration:                   CalibrationApply,
		PDMinUncachedTokens:           DefaultPDMinUncachedTokens,
		PDTransferMsPerToken:          DefaultPDTransferMsPerToken,
		PDFallback:                    PDFallbackLocal,
		PDInterferenceWeight:          DefaultPDInterferenceWeight,
		PDDecodeRunningMs:             DefaultPDDecodeRunningMs,
		PDMode:                        PDConditional,
		ShortLaneMaxPrefillMs:         DefaultShortLaneMaxPrefillMs,
		QueueTTL:                      30 * time.Second,
		QueueMaxWaiting:               1000,
		QueueMaxPerBand:               1000,
	}
}

// Validate reports every field of p outside its range (see the Policy
// fields), in field order, as one *PolicyError wrapping ErrInvalidPolicy
// that names each field by its proto name, e.g. "invalid policy: delta_ms
// must be in [0.001, 1000000] ms, got 1e-300; batch_wait_ms must be in
// [0, 60000] ms, got 1e+300". NaN and infinities are outside every range.
// An unknown on_saturation is invalid too. A nil p is invalid. Validate does not allocate when p is valid; it is safe
// for concurrent use.
func (p *Policy) Validate() error {
	if p != nil && p.valid() {
		return nil
	}
	return p.explain()
}

// valid is Validate's fast path (Decide runs Validate on every call): plain
// comparisons, false for NaN. explain is authoritative and must return nil
// whenever valid is true.
func (p *Policy) valid() bool {
	in := func(v, lo, hi float64) bool { return v >= lo && v <= hi }
	return p.Strategy < numStrategies &&
		in(p.LambdaH, 0, MaxLambdaH) &&
		in(p.DeltaMs, MinDeltaMs, MaxDeltaMs) &&
		in(p.ThresholdRatio, 0, MaxThresholdRatio) &&
		in(p.ThresholdMinMs, 0, MaxThresholdMinMs) &&
		in(p.BatchWaitMs, 0, MaxBatchWaitMs) &&
		p.BlockSizeTokens >= 1 && p.BlockSizeTokens <= MaxBlockSizeTokens &&
		in(p.DefaultPrefillTokensPerSecond, MinPrefillTokensPerSecond, MaxPrefillTokensPerSecond) &&
		(p.DoublingContextTokens == 0 || in(p.DoublingContextTokens, MinDoublingContextTokens, MaxDoublingContextTokens)) &&
		p.MaxKVUsage > 0 && p.MaxKVUsage <= 1 &&
		in(p.MaxQueueMs, 0, MaxMaxQueueMs) &&
		(p.DeploymentDeltaMs == 0 || in(p.DeploymentDeltaMs, MinDeltaMs, MaxDeltaMs)) &&
		p.StaleAfter >= MinStaleAfter && p.StaleAfter <= MaxStaleAfter &&
		p.ForgetAfter >= p.StaleAfter && p.ForgetAfter <= MaxForgetAfter &&
		p.DefaultKVCapacityBlocks >= 1 && p.DefaultKVCapacityBlocks <= MaxDefaultKVCapacityBlocks &&
		p.OnSaturation < numSaturations &&
		p.OnSLOMiss < numSLOMisses &&
		p.Calibration < numCalibrationModes &&
		p.PDMinUncachedTokens <= MaxPDMinUncachedTokens &&
		in(p.PDTransferMsPerToken, 0, MaxPDTransferMsPerToken) &&
		p.PDFallback < numPDFallbacks &&
		in(p.PDInterferenceWeight, 0, MaxPDInterferenceWeight) &&
		in(p.PDDecodeRunningMs, 0, MaxPDDecodeRunningMs) &&
		p.PDMode < numPDModes &&
		p.ShortLanes <= MaxShortLanes &&
		in(p.ShortLaneMaxPrefillMs, MinShortLaneMaxPrefillMs, MaxShortLaneMaxPrefillMs) &&
		p.QueueTTL >= MinQueueTTL && p.QueueTTL <= MaxQueueTTL &&
		p.QueueMaxWaiting >= 1 && p.QueueMaxWaiting <= MaxQueueWaiting &&
		p.QueueMaxPerBand >= 1 && p.QueueMaxPerBand <= MaxQueueWaiting &&
		in(p.DispatchSpacingMs, 0, MaxDispatchSpacingMs)
}

// explain returns a *PolicyError listing every invalid field of p, in
// PolicyFields order, or nil.
func (p *Policy) explain() error {
	if p == nil {
		return &PolicyError{Problems: []string{"policy is nil"}}
	}
	var c checker
	for i := range policyFields {
		policyFields[i].check(p, &c)
	}
	return c.err()
}
