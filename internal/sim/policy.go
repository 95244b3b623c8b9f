package sim

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/internal/protoconv"
	"github.com/prefixroute/prefixroute/scheduler"
)

// PolicySpec is the scheduler.Policy fields a scenario or a variant sets,
// by their keys in scheduler.PolicyFields (the proto field names); fields
// it does not set keep the value underneath (the scenario's policy, then
// scheduler.DefaultPolicy with the scenario's block_tokens). Numbers are
// plain YAML numbers, durations as Duration ("2s" or seconds), enums by
// name. A plain value.
type PolicySpec struct {
	set []policySetting // in the order of the YAML mapping
}

// policySetting is one field a PolicySpec sets.
type policySetting struct {
	field scheduler.PolicyField
	float float64
	uint  uint64
	dur   time.Duration
	enum  uint8
}

// UnmarshalYAML reads a mapping of policy keys to values; an unknown key,
// a key given twice or a value of the wrong kind fails, naming its line.
func (s *PolicySpec) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: policy must be a mapping of policy keys to values", n.Line)
	}
	*s = PolicySpec{}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		f, ok := scheduler.PolicyFieldByKey(k.Value)
		if !ok {
			keys := make([]string, 0, 16)
			for _, f := range scheduler.PolicyFields() {
				keys = append(keys, f.Key)
			}
			return fmt.Errorf("line %d: field %s not found in policy; keys: %s", k.Line, k.Value, strings.Join(keys, ", "))
		}
		if seen[f.Key] {
			return fmt.Errorf("line %d: policy key %s given twice", k.Line, f.Key)
		}
		seen[f.Key] = true
		ps, err := parseSetting(f, v)
		if err != nil {
			return fmt.Errorf("line %d: %w", v.Line, err)
		}
		s.set = append(s.set, ps)
	}
	return nil
}

// parseSetting parses v as a value of field f.
func parseSetting(f scheduler.PolicyField, v *yaml.Node) (policySetting, error) {
	ps := policySetting{field: f}
	if v.Kind != yaml.ScalarNode {
		return ps, fmt.Errorf("%s: want a single value", f.Key)
	}
	var err error
	switch f.Kind {
	case scheduler.FieldFloat:
		ps.float, err = strconv.ParseFloat(v.Value, 64)
		if err != nil {
			return ps, fmt.Errorf("%s: %q is not a number", f.Key, v.Value)
		}
	case scheduler.FieldUint32, scheduler.FieldUint64:
		bits := 64
		if f.Kind == scheduler.FieldUint32 {
			bits = 32
		}
		ps.uint, err = strconv.ParseUint(v.Value, 10, bits)
		if err != nil {
			return ps, fmt.Errorf("%s: %q is not a whole number in [0, %d]", f.Key, v.Value, uint64(1)<<bits-1)
		}
	case scheduler.FieldDuration:
		var d Duration
		if err := d.UnmarshalYAML(v); err != nil {
			return ps, fmt.Errorf("%s: %q is not a duration; want e.g. \"2s\", \"500ms\" or a number of seconds", f.Key, v.Value)
		}
		ps.dur = d.D()
	case scheduler.FieldEnum:
		e, ok := f.ParseEnum(v.Value)
		if !ok {
			return ps, fmt.Errorf("%w: %s must be %s, got %q", scheduler.ErrInvalidPolicy, f.Key, f.NameList(), v.Value)
		}
		ps.enum = e
	}
	return ps, nil
}

// apply returns base with s's fields set, validated. A stale_after set
// without forget_after raises forget_after to at least it.
func (s *PolicySpec) apply(base scheduler.Policy) (scheduler.Policy, error) {
	p := base
	forgetSet := false
	for _, ps := range s.set {
		f := ps.field
		switch f.Kind {
		case scheduler.FieldFloat:
			*f.Float(&p) = ps.float
		case scheduler.FieldUint32:
			*f.Uint32(&p) = uint32(ps.uint)
		case scheduler.FieldUint64:
			*f.Uint64(&p) = ps.uint
		case scheduler.FieldDuration:
			*f.Duration(&p) = ps.dur
		case scheduler.FieldEnum:
			*f.Enum(&p) = ps.enum
		}
		forgetSet = forgetSet || f.Key == "forget_after"
	}
	if !forgetSet {
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
// speed times slower than the simulation's (live mode): every field in ms
// is divided by speed, every throughput (tokens/s) multiplied.
func policyProto(p scheduler.Policy, speed float64) *pb.Policy {
	for _, f := range scheduler.PolicyFields() {
		switch f.Unit {
		case "ms":
			*f.Float(&p) /= speed
		case "tokens/s":
			*f.Float(&p) *= speed
		}
	}
	return protoconv.PolicyProto(&p)
}
