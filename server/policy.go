package server

import (
	"fmt"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/scheduler"
)

func strategyProto(s scheduler.Strategy) pb.Strategy {
	switch s {
	case scheduler.Threshold:
		return pb.Strategy_STRATEGY_THRESHOLD
	case scheduler.Argmin:
		return pb.Strategy_STRATEGY_ARGMIN
	}
	return pb.Strategy_STRATEGY_SOFTMAX
}

// saturations maps the proto's on_saturation values to the scheduler's.
var saturations = map[pb.OnSaturation]scheduler.Saturation{
	pb.OnSaturation_ON_SATURATION_LEAST_LOADED: scheduler.SaturationLeastLoaded,
	pb.OnSaturation_ON_SATURATION_SHED:         scheduler.SaturationShed,
}

func saturationProto(s scheduler.Saturation) pb.OnSaturation {
	if s == scheduler.SaturationShed {
		return pb.OnSaturation_ON_SATURATION_SHED
	}
	return pb.OnSaturation_ON_SATURATION_LEAST_LOADED
}

// policyProto renders every field of p.
func policyProto(p *scheduler.Policy) *pb.Policy {
	return &pb.Policy{
		Strategy:                      strategyProto(p.Strategy),
		LambdaH:                       &p.LambdaH,
		DeltaMs:                       &p.DeltaMs,
		ThresholdRatio:                &p.ThresholdRatio,
		ThresholdMinMs:                &p.ThresholdMinMs,
		BatchWaitMs:                   &p.BatchWaitMs,
		BlockSizeTokens:               &p.BlockSizeTokens,
		DefaultPrefillTokensPerSecond: &p.DefaultPrefillTokensPerSecond,
		MaxKvUsage:                    &p.MaxKVUsage,
		MaxQueueMs:                    &p.MaxQueueMs,
		DeploymentDeltaMs:             &p.DeploymentDeltaMs,
		StaleAfter:                    durationpb.New(p.StaleAfter),
		ForgetAfter:                   durationpb.New(p.ForgetAfter),
		DefaultKvCapacityBlocks:       &p.DefaultKVCapacityBlocks,
		OnSaturation:                  saturationProto(p.OnSaturation),
	}
}

// mergePolicy returns base with the fields set in m, validated. A nil m
// sets no field.
func mergePolicy(base scheduler.Policy, m *pb.Policy) (scheduler.Policy, error) {
	if m == nil {
		m = &pb.Policy{} // found by FuzzSetPolicy: SetPolicy without a policy panicked
	}
	p := base
	switch m.GetStrategy() {
	case pb.Strategy_STRATEGY_UNSPECIFIED:
	case pb.Strategy_STRATEGY_SOFTMAX:
		p.Strategy = scheduler.Softmax
	case pb.Strategy_STRATEGY_THRESHOLD:
		p.Strategy = scheduler.Threshold
	case pb.Strategy_STRATEGY_ARGMIN:
		p.Strategy = scheduler.Argmin
	default:
		return p, fmt.Errorf("%w: strategy %d is not one of softmax, threshold, argmin", scheduler.ErrInvalidPolicy, m.GetStrategy())
	}
	if v := m.GetOnSaturation(); v != pb.OnSaturation_ON_SATURATION_UNSPECIFIED {
		s, ok := saturations[v]
		if !ok {
			return p, fmt.Errorf("%w: on_saturation %d is not one of least_loaded, shed", scheduler.ErrInvalidPolicy, v)
		}
		p.OnSaturation = s
	}
	set(&p.LambdaH, m.LambdaH)
	set(&p.DeltaMs, m.DeltaMs)
	set(&p.ThresholdRatio, m.ThresholdRatio)
	set(&p.ThresholdMinMs, m.ThresholdMinMs)
	set(&p.BatchWaitMs, m.BatchWaitMs)
	set(&p.BlockSizeTokens, m.BlockSizeTokens)
	set(&p.DefaultPrefillTokensPerSecond, m.DefaultPrefillTokensPerSecond)
	set(&p.MaxKVUsage, m.MaxKvUsage)
	set(&p.MaxQueueMs, m.MaxQueueMs)
	set(&p.DeploymentDeltaMs, m.DeploymentDeltaMs)
	set(&p.DefaultKVCapacityBlocks, m.DefaultKvCapacityBlocks)
	if err := setDuration(&p.StaleAfter, "stale_after", m.GetStaleAfter()); err != nil {
		return p, err
	}
	if err := setDuration(&p.ForgetAfter, "forget_after", m.GetForgetAfter()); err != nil {
		return p, err
	}
	if err := p.Validate(); err != nil {
		return p, err
	}
	return p, nil
}

func setDuration(dst *time.Duration, name string, v *durationpb.Duration) error {
	if v == nil {
		return nil
	}
	if err := v.CheckValid(); err != nil {
		return fmt.Errorf("%w: %s: %v", scheduler.ErrInvalidPolicy, name, err)
	}
	*dst = v.AsDuration()
	return nil
}

func set[T any](dst *T, v *T) {
	if v != nil {
		*dst = *v
	}
}
