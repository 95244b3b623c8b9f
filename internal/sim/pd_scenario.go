package sim

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/prefixroute/prefixroute/scheduler"
)

// PDScenario is a Scenario on a disaggregated fleet: the scenario's fields
// (inline) plus a pd section that gives instances their roles and the
// physics of the KV transfer and of decoding. It is read by
// ParsePDScenario or LoadPDScenario and only read by RunPD, so one may be
// shared by concurrent runs.
type PDScenario struct {
	Scenario `yaml:",inline"`
	PD       PDSpec `yaml:"pd"`
}

// PDSpec is the disaggregated fleet and its physics.
type PDSpec struct {
	// Prefill and Decode give, per deployment name, how many of its
	// instances report the role prefill (its first ones) and decode (the
	// next ones); the rest report both.
	Prefill map[string]int `yaml:"prefill"`
	Decode  map[string]int `yaml:"decode"`
	// DecodePrefillTokensPerSecond is a decode instance's prefill
	// throughput (a decode engine runs small prefill chunks); 0: its
	// deployment's prefill_tokens_per_second.
	DecodePrefillTokensPerSecond float64 `yaml:"decode_prefill_tokens_per_second"`
	// TransferMsPerToken is the KV transfer time per token that the decode
	// instance lacks when a remote prefill ends, in ms (the physics; the
	// router's estimate is policy pd_transfer_ms_per_token).
	TransferMsPerToken float64 `yaml:"transfer_ms_per_token"`
	// DecodeSlots bounds the requests decoding at once on an instance;
	// later ones wait for a slot (their first token waits too). Default 64.
	DecodeSlots int `yaml:"decode_slots"`
	// DecodeInterference is κ of the interference model: a prefill batch
	// of T on an instance stalls each decode running there when the batch
	// starts by κ·T (1: decode steps stop while the batch runs). Default 1.
	DecodeInterference *float64 `yaml:"decode_interference"`
	// DecodeMsPerRunning makes the decode step grow with the decode batch:
	// with n requests decoding on an instance, every one of them advances
	// one token per decode_per_token + DecodeMsPerRunning·(n−1) ms (vLLM's
	// step reads the weights once and each request's KV, SIMULATION.md
	// section 8 gives the source). Default 0: the step is decode_per_token
	// whatever the batch (then the decode end is computed as before).
	DecodeMsPerRunning float64 `yaml:"decode_ms_per_running"`
	// Deciders maps a variant to the prefill decision it applies:
	// "router" (default: the router's decision as is), "always" (every
	// request prefills on a prefill instance: SGLang's gateway, FlexLB),
	// "llmd" (llm-d's prefix-based-pd-decider, nonCachedTokens 16),
	// "dynamo" (Dynamo's isl_bounding), "local" (never).
	Deciders map[string]string `yaml:"deciders"`
}

// PD deciders (PDSpec.Deciders).
var pdDeciders = []string{"router", "always", "llmd", "dynamo", "local"}

// Defaults of PDSpec.
const (
	defaultDecodeSlots        = 64
	defaultDecodeInterference = 1.0
)

// LoadPDScenario reads a PD scenario file.
func LoadPDScenario(path string) (*PDScenario, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	sc, err := ParsePDScenario(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	sc.dir = filepath.Dir(path)
	return sc, nil
}

// ParsePDScenario decodes a PD scenario (unknown fields are errors), fills
// in the defaults and validates it.
func ParsePDScenario(data []byte) (*PDScenario, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var sc PDScenario
	if err := dec.Decode(&sc); err != nil {
		return nil, err
	}
	sc.defaults()
	if sc.PD.DecodeSlots == 0 {
		sc.PD.DecodeSlots = defaultDecodeSlots
	}
	if sc.PD.DecodeInterference == nil {
		k := defaultDecodeInterference
		sc.PD.DecodeInterference = &k
	}
	if err := sc.Validate(); err != nil {
		return nil, err
	}
	if err := sc.validatePD(); err != nil {
		return nil, fmt.Errorf("pd: %w", err)
	}
	return &sc, nil
}

func (sc *PDScenario) validatePD() error {
	p := &sc.PD
	for _, m := range []map[string]int{p.Prefill, p.Decode} {
		for name, n := range m {
			if !slices.ContainsFunc(sc.Deployments, func(d DeploymentSpec) bool { return d.Name == name }) {
				return fmt.Errorf("deployment %q: no such deployment", name)
			}
			if n < 0 {
				return fmt.Errorf("deployment %q: %d instances: want ≥ 0", name, n)
			}
		}
	}
	for _, d := range sc.Deployments {
		if p.Prefill[d.Name]+p.Decode[d.Name] > d.Instances {
			return fmt.Errorf("deployment %q: %d prefill + %d decode instances, but it has %d",
				d.Name, p.Prefill[d.Name], p.Decode[d.Name], d.Instances)
		}
	}
	switch {
	case p.DecodePrefillTokensPerSecond < 0:
		return fmt.Errorf("decode_prefill_tokens_per_second %g: want ≥ 0 tokens/s", p.DecodePrefillTokensPerSecond)
	case p.TransferMsPerToken < 0 || p.TransferMsPerToken > 1000:
		return fmt.Errorf("transfer_ms_per_token %g: want 0–1000 ms", p.TransferMsPerToken)
	case p.DecodeSlots < 1 || p.DecodeSlots > 100000:
		return fmt.Errorf("decode_slots %d: want 1–100000", p.DecodeSlots)
	case *p.DecodeInterference < 0 || *p.DecodeInterference > 10:
		return fmt.Errorf("decode_interference %g: want 0–10", *p.DecodeInterference)
	case !(p.DecodeMsPerRunning >= 0 && p.DecodeMsPerRunning <= 1000):
		return fmt.Errorf("decode_ms_per_running %g: want 0–1000 ms", p.DecodeMsPerRunning)
	}
	for v, d := range p.Deciders {
		if !slices.ContainsFunc(sc.Variants, func(x Variant) bool { return x.Name == v }) {
			return fmt.Errorf("deciders: no variant %q", v)
		}
		if !slices.Contains(pdDeciders, d) {
			return fmt.Errorf("deciders: variant %q: decider %q: want one of %v", v, d, pdDeciders)
		}
	}
	for _, v := range sc.Variants {
		switch {
		case v.Baseline():
			return fmt.Errorf("variant %q: picker %q: a pd scenario needs the router (deciders override its prefill choice)", v.Name, v.Picker)
		case v.Outcomes:
			return fmt.Errorf("variant %q: outcomes: not supported in a pd scenario", v.Name)
		case v.Readiness != nil || sc.Readiness != nil:
			return fmt.Errorf("variant %q: readiness: not supported in a pd scenario", v.Name)
		}
	}
	return nil
}

// decider is the variant's prefill decider ("router" by default).
func (p *PDSpec) decider(variant string) string {
	if d, ok := p.Deciders[variant]; ok {
		return d
	}
	return "router"
}

// roles gives each instance of the fleet (in engine order: deployments in
// order, instances in order) its role.
func (sc *PDScenario) roles() []scheduler.Role {
	var out []scheduler.Role
	for _, d := range sc.Deployments {
		np, nd := sc.PD.Prefill[d.Name], sc.PD.Decode[d.Name]
		for k := range d.Instances {
			switch {
			case k < np:
				out = append(out, scheduler.RolePrefill)
			case k < np+nd:
				out = append(out, scheduler.RoleDecode)
			default:
				out = append(out, scheduler.RoleBoth)
			}
		}
	}
	return out
}

// transfer is the KV transfer time of tokens.
func (p *PDSpec) transfer(tokens uint32) time.Duration {
	return time.Duration(p.TransferMsPerToken * float64(tokens) * 1e6)
}
