package sim

import (
	"fmt"
	"slices"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/scheduler"
)

// PolicySpec is the part of a scheduler.Policy a scenario may set, by the
// proto field names; nil fields keep the value underneath (the scenario's
// policy, then scheduler.DefaultPolicy). A plain value.
type PolicySpec struct {
	Strategy          string    `yaml:"strategy"`
	LambdaH           *float64  `yaml:"lambda_h"`
	DeltaMs           *float64  `yaml:"delta_ms"`
	ThresholdRatio    *float64  `yaml:"threshold_ratio"`
	ThresholdMinMs    *float64  `yaml:"threshold_min_ms"`
	BatchWaitMs       *float64  `yaml:"batch_wait_ms"`
	MaxKVUsage        *float64  `yaml:"max_kv_usage"`
	MaxQueueMs        *float64  `yaml:"max_queue_ms"`
	DeploymentDeltaMs *float64  `yaml:"deployment_delta_ms"`
	StaleAfter        *Duration `yaml:"stale_after"`
}

// apply returns base with s's fields set.
func (s *PolicySpec) apply(base scheduler.Policy) (scheduler.Policy, error) {
	p := base
	if s.Strategy != "" {
		st, err := scheduler.ParseStrategy(s.Strategy)
		if err != nil {
			return p, err
		}
		p.Strategy = st
	}
	set := func(dst *float64, v *float64) {
		if v != nil {
			*dst = *v
		}
	}
	set(&p.LambdaH, s.LambdaH)
	set(&p.DeltaMs, s.DeltaMs)
	set(&p.ThresholdRatio, s.ThresholdRatio)
	set(&p.ThresholdMinMs, s.ThresholdMinMs)
	set(&p.BatchWaitMs, s.BatchWaitMs)
	set(&p.MaxKVUsage, s.MaxKVUsage)
	set(&p.MaxQueueMs, s.MaxQueueMs)
	set(&p.DeploymentDeltaMs, s.DeploymentDeltaMs)
	if s.StaleAfter != nil {
		p.StaleAfter = s.StaleAfter.D()
		p.ForgetAfter = max(p.ForgetAfter, p.StaleAfter)
	}
	return p, p.Validate()
}

// runConfig is one variant of a scenario with everything resolved.
type runConfig struct {
	sc             *Scenario
	variant        Variant
	policy         scheduler.Policy
	cacheEvents    bool
	routers        int
	reportInterval time.Duration
	weights        []WeightStep
	probe          *probeConfig // nil: no readiness probe
}

// resolve merges the scenario's defaults with variant v.
func (sc *Scenario) resolve(v *Variant) (*runConfig, error) {
	base := scheduler.DefaultPolicy()
	base.BlockSizeTokens = uint32(sc.BlockTokens)
	base, err := sc.Policy.apply(base)
	if err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	p, err := v.Policy.apply(base)
	if err != nil {
		return nil, fmt.Errorf("variant %q: policy: %w", v.Name, err)
	}
	rc := &runConfig{sc: sc, variant: *v, policy: p, cacheEvents: sc.CacheEvents, routers: sc.Routers,
		reportInterval: sc.ReportInterval.D(), weights: sc.Weights}
	if v.CacheEvents != nil {
		rc.cacheEvents = *v.CacheEvents
	}
	if v.Routers > 0 {
		rc.routers = v.Routers
	}
	if v.Baseline() {
		rc.routers = 1
	}
	if v.ReportInterval > 0 {
		rc.reportInterval = v.ReportInterval.D()
	}
	if len(v.Weights) > 0 {
		rc.weights = v.Weights
	}
	if len(rc.weights) == 0 {
		all := map[string]float64{}
		for _, d := range sc.Deployments {
			all[d.Name] = 1
		}
		rc.weights = []WeightStep{{Weights: all}}
	}
	rc.weights = slices.Clone(rc.weights)
	slices.SortStableFunc(rc.weights, func(a, b WeightStep) int { return int(a.At - b.At) })
	ramp, rampWhere := sc.Ramp, ""
	if v.Ramp != nil {
		ramp, rampWhere = v.Ramp, fmt.Sprintf("variant %q: ", v.Name)
	}
	if ramp != nil {
		if rc.weights, err = expandRamp(sc, rc.weights, ramp); err != nil {
			return nil, fmt.Errorf("%s%w", rampWhere, err)
		}
	}
	probe, probeWhere := sc.Readiness, ""
	if v.Readiness != nil {
		probe, probeWhere = v.Readiness, fmt.Sprintf("variant %q: ", v.Name)
	}
	if probe != nil {
		if rc.probe, err = resolveProbe(sc, rc.weights, probe); err != nil {
			return nil, fmt.Errorf("%s%w", probeWhere, err)
		}
	}
	return rc, nil
}

// policyProto is p as a SetPolicy message for a server whose clock runs
// speed times slower than the simulation's (live mode): every parameter in
// ms is divided by speed, the default throughput multiplied.
func policyProto(p scheduler.Policy, speed float64) *pb.Policy {
	ms := func(v float64) *float64 { v /= speed; return &v }
	strategy := map[scheduler.Strategy]pb.Strategy{scheduler.Softmax: pb.Strategy_STRATEGY_SOFTMAX,
		scheduler.Threshold: pb.Strategy_STRATEGY_THRESHOLD, scheduler.Argmin: pb.Strategy_STRATEGY_ARGMIN}[p.Strategy]
	tps := p.DefaultPrefillTokensPerSecond * speed
	bs := p.BlockSizeTokens
	return &pb.Policy{
		Strategy: strategy, LambdaH: &p.LambdaH, DeltaMs: ms(p.DeltaMs), ThresholdRatio: &p.ThresholdRatio,
		ThresholdMinMs: ms(p.ThresholdMinMs), BatchWaitMs: ms(p.BatchWaitMs), BlockSizeTokens: &bs,
		DefaultPrefillTokensPerSecond: &tps, MaxKvUsage: &p.MaxKVUsage, MaxQueueMs: ms(p.MaxQueueMs),
		DeploymentDeltaMs: ms(p.DeploymentDeltaMs),
		StaleAfter:        durationpb.New(p.StaleAfter), ForgetAfter: durationpb.New(p.ForgetAfter),
	}
}
