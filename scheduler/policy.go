package scheduler

import (
	"fmt"
	"math"
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
	numSaturations
)

var saturationNames = [numSaturations]string{
	SaturationLeastLoaded: "least_loaded",
	SaturationShed:        "shed",
}

// String returns "least_loaded" or "shed", and "Saturation(N)" for an
// unknown value.
func (s Saturation) String() string { return nameOf(saturationNames[:], int(s), "Saturation") }

// ParseSaturation parses "least_loaded" or "shed" (case and surrounding
// spaces ignored). Any other string gives an error wrapping
// ErrInvalidPolicy.
func ParseSaturation(s string) (Saturation, error) {
	if i, ok := lookupName(saturationNames[:], s); ok {
		return Saturation(i), nil
	}
	return SaturationLeastLoaded, fmt.Errorf("%w: on_saturation must be shed or least_loaded, got %q", ErrInvalidPolicy, s)
}

// Policy holds every scheduling parameter of a pool. The zero value is not
// valid; start from DefaultPolicy. A Policy is a plain value: safe to copy,
// safe for concurrent reads (Decide only reads it).
type Policy struct {
	// Strategy is the instance-level rule. Default Softmax.
	Strategy Strategy
	// LambdaH is the hit-ratio bias of the deployment level: each +1/LambdaH
	// of hit ratio doubles a deployment's odds. 0 turns the bias off.
	// Default 10. Range [0, 100].
	LambdaH float64
	// DeltaMs is the softmax decay: every DeltaMs of extra cost halves an
	// instance's odds. Default 20. Must be finite and > 0.
	DeltaMs float64
	// ThresholdRatio and ThresholdMinMs set the Threshold band
	// max(ThresholdRatio*S_min, ThresholdMinMs). Defaults 0.1 and 20. Both
	// >= 0.
	ThresholdRatio float64
	ThresholdMinMs float64
	// BatchWaitMs is the router-side batching wait added to every cost.
	// Default 0. Must be >= 0.
	BatchWaitMs float64
	// BlockSizeTokens is the KV block size of instances that do not report
	// one. Default 16. Must be > 0.
	BlockSizeTokens uint32
	// DefaultPrefillTokensPerSecond is the prefill throughput of instances
	// that do not report one. Default 10000. Must be > 0.
	DefaultPrefillTokensPerSecond float64
	// MaxKVUsage excludes instances whose KV usage is at or over it.
	// Default 0.95. Range (0, 1]; 1 excludes only a completely full cache.
	MaxKVUsage float64
	// MaxQueueMs excludes instances whose queue_ms is over it. Default 0: off.
	MaxQueueMs float64
	// DeploymentDeltaMs turns on the deployment-level load term: every
	// DeploymentDeltaMs of extra queueing (soft-min over the deployment's
	// eligible instances, relative to the least-loaded deployment) halves a
	// deployment's odds. Default 0: off, and the seed's formula holds exactly.
	DeploymentDeltaMs float64
	// StaleAfter excludes instances whose last report is older. Default 2s.
	// Must be > 0.
	StaleAfter time.Duration
	// ForgetAfter is how long the state layer keeps a disconnected instance,
	// or one silent on an open stream, and its cache entries. Default 30s. Must be >= StaleAfter. Not
	// used by Decide.
	ForgetAfter time.Duration
	// DefaultKVCapacityBlocks bounds the approximate prefix index of an
	// instance that reports no kv_capacity_blocks. Default 16384. Not used by
	// Decide and not checked by Validate (its meaning, 0 included, belongs to
	// the state layer).
	DefaultKVCapacityBlocks uint64
	// OnSaturation is what Decide does when every live instance is excluded
	// for load. Default SaturationLeastLoaded.
	OnSaturation Saturation
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
		MaxKVUsage:                    0.95,
		MaxQueueMs:                    0,
		DeploymentDeltaMs:             0,
		StaleAfter:                    2 * time.Second,
		ForgetAfter:                   30 * time.Second,
		DefaultKVCapacityBlocks:       16384,
		OnSaturation:                  SaturationLeastLoaded,
	}
}

// Validate reports the first invalid field of p, in field order, as an error
// wrapping ErrInvalidPolicy that names the field by its proto name, e.g.
// "scheduler: invalid policy: delta_ms must be > 0, got -1". It rejects NaN
// and infinities everywhere, negative numbers, an unknown strategy,
// lambda_h > 100, delta_ms <= 0, block_size_tokens 0,
// default_prefill_tokens_per_second <= 0, max_kv_usage outside (0, 1],
// stale_after <= 0, forget_after < stale_after and an unknown
// on_saturation. A nil p is invalid.
// Validate does not allocate when p is valid; it is safe for concurrent use.
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
	const maxF = math.MaxFloat64
	return p.Strategy < numStrategies &&
		p.LambdaH >= 0 && p.LambdaH <= 100 &&
		p.DeltaMs > 0 && p.DeltaMs <= maxF &&
		p.ThresholdRatio >= 0 && p.ThresholdRatio <= maxF &&
		p.ThresholdMinMs >= 0 && p.ThresholdMinMs <= maxF &&
		p.BatchWaitMs >= 0 && p.BatchWaitMs <= maxF &&
		p.BlockSizeTokens > 0 &&
		p.DefaultPrefillTokensPerSecond > 0 && p.DefaultPrefillTokensPerSecond <= maxF &&
		p.MaxKVUsage > 0 && p.MaxKVUsage <= 1 &&
		p.MaxQueueMs >= 0 && p.MaxQueueMs <= maxF &&
		p.DeploymentDeltaMs >= 0 && p.DeploymentDeltaMs <= maxF &&
		p.StaleAfter > 0 && p.ForgetAfter >= p.StaleAfter &&
		p.OnSaturation < numSaturations
}

// explain returns the error for the first invalid field of p, or nil.
func (p *Policy) explain() error {
	if p == nil {
		return fmt.Errorf("%w: policy is nil", ErrInvalidPolicy)
	}
	if p.Strategy >= numStrategies {
		return fmt.Errorf("%w: strategy must be softmax, threshold or argmin, got %v", ErrInvalidPolicy, p.Strategy)
	}
	if err := checkRange("lambda_h", p.LambdaH, 0, 100); err != nil {
		return err
	}
	if err := checkPositive("delta_ms", p.DeltaMs); err != nil {
		return err
	}
	if err := checkNonNegative("threshold_ratio", p.ThresholdRatio); err != nil {
		return err
	}
	if err := checkNonNegative("threshold_min_ms", p.ThresholdMinMs); err != nil {
		return err
	}
	if err := checkNonNegative("batch_wait_ms", p.BatchWaitMs); err != nil {
		return err
	}
	if p.BlockSizeTokens == 0 {
		return fmt.Errorf("%w: block_size_tokens must be > 0, got 0", ErrInvalidPolicy)
	}
	if err := checkPositive("default_prefill_tokens_per_second", p.DefaultPrefillTokensPerSecond); err != nil {
		return err
	}
	if v := p.MaxKVUsage; !(v > 0 && v <= 1) {
		return fmt.Errorf("%w: max_kv_usage must be in (0, 1], got %v", ErrInvalidPolicy, v)
	}
	if err := checkNonNegative("max_queue_ms", p.MaxQueueMs); err != nil {
		return err
	}
	if err := checkNonNegative("deployment_delta_ms", p.DeploymentDeltaMs); err != nil {
		return err
	}
	if p.StaleAfter <= 0 {
		return fmt.Errorf("%w: stale_after must be > 0, got %v", ErrInvalidPolicy, p.StaleAfter)
	}
	if p.ForgetAfter < p.StaleAfter {
		return fmt.Errorf("%w: forget_after must be >= stale_after (%v), got %v", ErrInvalidPolicy, p.StaleAfter, p.ForgetAfter)
	}
	if p.OnSaturation >= numSaturations {
		return fmt.Errorf("%w: on_saturation must be shed or least_loaded, got %v", ErrInvalidPolicy, p.OnSaturation)
	}
	return nil
}

func checkFinite(name string, v float64) error {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return fmt.Errorf("%w: %s must be finite, got %v", ErrInvalidPolicy, name, v)
	}
	return nil
}

func checkNonNegative(name string, v float64) error {
	if err := checkFinite(name, v); err != nil {
		return err
	}
	if v < 0 {
		return fmt.Errorf("%w: %s must be >= 0, got %v", ErrInvalidPolicy, name, v)
	}
	return nil
}

func checkPositive(name string, v float64) error {
	if err := checkFinite(name, v); err != nil {
		return err
	}
	if v <= 0 {
		return fmt.Errorf("%w: %s must be > 0, got %v", ErrInvalidPolicy, name, v)
	}
	return nil
}

func checkRange(name string, v, lo, hi float64) error {
	if err := checkFinite(name, v); err != nil {
		return err
	}
	if v < lo || v > hi {
		return fmt.Errorf("%w: %s must be in [%v, %v], got %v", ErrInvalidPolicy, name, lo, hi, v)
	}
	return nil
}
