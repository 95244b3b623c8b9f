package store

import (
	"fmt"
	"math"
	"time"

	"github.com/prefixroute/prefixroute/scheduler"
)

// defaultPolicy is the policy whose fields a state file may leave out.
func defaultPolicy() scheduler.Policy { return scheduler.DefaultPolicy() }

// policyJSON is a scheduler.Policy as the state file and the audit log hold
// it: one snake_case field per Policy field, durations as Go duration strings
// ("2s", "1m30s", "250ms"), the strategy by name (scheduler.Strategy.String,
// scheduler.ParseStrategy). A field that is absent when loading takes its
// default value. Every Policy field must appear here; TestPolicyJSONCoversEveryField
// fails when one is missing.
type policyJSON struct {
	Strategy                      *string  `json:"strategy,omitempty"`
	LambdaH                       *float64 `json:"lambda_h,omitempty"`
	DeltaMs                       *float64 `json:"delta_ms,omitempty"`
	ThresholdRatio                *float64 `json:"threshold_ratio,omitempty"`
	ThresholdMinMs                *float64 `json:"threshold_min_ms,omitempty"`
	BatchWaitMs                   *float64 `json:"batch_wait_ms,omitempty"`
	BlockSizeTokens               *uint32  `json:"block_size_tokens,omitempty"`
	DefaultPrefillTokensPerSecond *float64 `json:"default_prefill_tokens_per_second,omitempty"`
	MaxKVUsage                    *float64 `json:"max_kv_usage,omitempty"`
	MaxQueueMs                    *float64 `json:"max_queue_ms,omitempty"`
	DeploymentDeltaMs             *float64 `json:"deployment_delta_ms,omitempty"`
	StaleAfter                    *string  `json:"stale_after,omitempty"`
	ForgetAfter                   *string  `json:"forget_after,omitempty"`
	DefaultKVCapacityBlocks       *uint64  `json:"default_kv_capacity_blocks,omitempty"`
	OnSaturation                  *string  `json:"on_saturation,omitempty"`
}

// encodePolicy returns p with every field set. It fails, wrapping
// ErrInvalidPolicy, on what JSON cannot carry: an unknown strategy, a NaN or
// an infinity.
func encodePolicy(p scheduler.Policy) (*policyJSON, error) {
	name := p.Strategy.String()
	if s, err := scheduler.ParseStrategy(name); err != nil || s != p.Strategy {
		return nil, invalid(fmt.Sprintf("unknown strategy %d; want softmax, threshold or argmin", p.Strategy),
			ErrInvalidPolicy)
	}
	sat := p.OnSaturation.String()
	if v, err := scheduler.ParseSaturation(sat); err != nil || v != p.OnSaturation {
		return nil, invalid(fmt.Sprintf("unknown on_saturation %d; want shed or least_loaded", p.OnSaturation),
			ErrInvalidPolicy)
	}
	floats := []struct {
		field string
		v     float64
	}{
		{"lambda_h", p.LambdaH}, {"delta_ms", p.DeltaMs},
		{"threshold_ratio", p.ThresholdRatio}, {"threshold_min_ms", p.ThresholdMinMs},
		{"batch_wait_ms", p.BatchWaitMs}, {"default_prefill_tokens_per_second", p.DefaultPrefillTokensPerSecond},
		{"max_kv_usage", p.MaxKVUsage}, {"max_queue_ms", p.MaxQueueMs},
		{"deployment_delta_ms", p.DeploymentDeltaMs},
	}
	for _, f := range floats {
		if math.IsNaN(f.v) || math.IsInf(f.v, 0) {
			return nil, invalid(fmt.Sprintf("%s is %s; want a finite number", f.field, formatFloat(f.v)),
				ErrInvalidPolicy)
		}
	}
	return &policyJSON{
		Strategy:                      &name,
		LambdaH:                       &p.LambdaH,
		DeltaMs:                       &p.DeltaMs,
		ThresholdRatio:                &p.ThresholdRatio,
		ThresholdMinMs:                &p.ThresholdMinMs,
		BatchWaitMs:                   &p.BatchWaitMs,
		BlockSizeTokens:               &p.BlockSizeTokens,
		DefaultPrefillTokensPerSecond: &p.DefaultPrefillTokensPerSecond,
		MaxKVUsage:                    &p.MaxKVUsage,
		MaxQueueMs:                    &p.MaxQueueMs,
		DeploymentDeltaMs:             &p.DeploymentDeltaMs,
		StaleAfter:                    ptr(p.StaleAfter.String()),
		ForgetAfter:                   ptr(p.ForgetAfter.String()),
		DefaultKVCapacityBlocks:       &p.DefaultKVCapacityBlocks,
		OnSaturation:                  &sat,
	}, nil
}

// decode returns the policy j describes, starting from the default policy
// for every absent field. The result must pass Policy.Validate, so that a
// hand-edited file cannot give the scheduler a policy it refuses.
func (j *policyJSON) decode() (scheduler.Policy, error) {
	p := defaultPolicy()
	if j.Strategy != nil {
		s, err := scheduler.ParseStrategy(*j.Strategy)
		if err != nil {
			return p, fmt.Errorf("unknown strategy %q; want softmax, threshold or argmin", *j.Strategy)
		}
		p.Strategy = s
	}
	if j.OnSaturation != nil {
		v, err := scheduler.ParseSaturation(*j.OnSaturation)
		if err != nil {
			return p, fmt.Errorf("unknown on_saturation %q; want shed or least_loaded", *j.OnSaturation)
		}
		p.OnSaturation = v
	}
	setIf(&p.LambdaH, j.LambdaH)
	setIf(&p.DeltaMs, j.DeltaMs)
	setIf(&p.ThresholdRatio, j.ThresholdRatio)
	setIf(&p.ThresholdMinMs, j.ThresholdMinMs)
	setIf(&p.BatchWaitMs, j.BatchWaitMs)
	setIf(&p.BlockSizeTokens, j.BlockSizeTokens)
	setIf(&p.DefaultPrefillTokensPerSecond, j.DefaultPrefillTokensPerSecond)
	setIf(&p.MaxKVUsage, j.MaxKVUsage)
	setIf(&p.MaxQueueMs, j.MaxQueueMs)
	setIf(&p.DeploymentDeltaMs, j.DeploymentDeltaMs)
	setIf(&p.DefaultKVCapacityBlocks, j.DefaultKVCapacityBlocks)
	for _, d := range []struct {
		field string
		s     *string
		dst   *time.Duration
	}{{"stale_after", j.StaleAfter, &p.StaleAfter}, {"forget_after", j.ForgetAfter, &p.ForgetAfter}} {
		if d.s == nil {
			continue
		}
		v, err := time.ParseDuration(*d.s)
		if err != nil {
			return p, fmt.Errorf("%s: %q is not a duration; want e.g. \"2s\" or \"500ms\"", d.field, *d.s)
		}
		*d.dst = v
	}
	if err := p.Validate(); err != nil {
		return p, err
	}
	return p, nil
}

func setIf[T any](dst *T, v *T) {
	if v != nil {
		*dst = *v
	}
}

func ptr[T any](v T) *T { return &v }
