package sim

import (
	"errors"
	"fmt"
	"math"
	"slices"
)

// Validate checks a scenario after defaults: every figure in range, names
// unique, the schedule sorted from 0 and naming known deployments, the
// workload given one way. The error names the first bad field.
func (sc *Scenario) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if sc.Duration <= 0 {
		bad("duration must be > 0")
	}
	if sc.Warmup < 0 || sc.Warmup >= sc.Duration {
		bad("warmup must be in [0, duration)")
	}
	if sc.BlockTokens <= 0 || sc.BlockTokens > 1<<16 {
		bad("block_tokens must be in (0, 65536]")
	}
	if sc.ReportInterval <= 0 {
		bad("report_interval must be > 0")
	}
	if sc.Routers < 1 || sc.Routers > 64 {
		bad("routers must be in [1, 64]")
	}
	if len(sc.Deployments) == 0 {
		bad("deployments: need at least one")
	}
	names := map[string]bool{}
	total := 0
	for i, d := range sc.Deployments {
		where := fmt.Sprintf("deployments[%d] (%s)", i, d.Name)
		switch {
		case d.Name == "" || names[d.Name]:
			bad("%s: name must be set and unique", where)
		case d.Instances < 1:
			bad("%s: instances must be >= 1", where)
		case !(d.PrefillTokensPerSecond > 0) || math.IsInf(d.PrefillTokensPerSecond, 0):
			bad("%s: prefill_tokens_per_second must be > 0", where)
		case d.DoublingContextTokens != nil && *d.DoublingContextTokens != 0 && !(*d.DoublingContextTokens >= 1 && *d.DoublingContextTokens <= 1e9):
			bad("%s: doubling_context_tokens must be 0 (off) or in [1, 1e9] tokens", where)
		case d.BatchOverhead < 0 || d.DecodePerToken < 0:
			bad("%s: batch_overhead and decode_per_token must be >= 0", where)
		case d.QueueReport != "" && d.QueueReport != "uncached" && d.QueueReport != "prompt":
			bad("%s: queue_report must be uncached or prompt", where)
		case d.MaxBatchTokens < 1:
			bad("%s: max_batch_tokens must be >= 1", where)
		case d.KVBlocks < 1:
			bad("%s: kv_blocks must be >= 1", where)
		}
		names[d.Name] = true
		total += d.Instances
	}
	if total > 4096 {
		bad("deployments: %d instances; the limit is 4096", total)
	}
	checkWeights := func(where string, steps []WeightStep) {
		for i, st := range steps {
			if i == 0 && st.At != 0 {
				bad("%s[0]: the first step must be at 0", where)
			}
			if i > 0 && st.At < steps[i-1].At {
				bad("%s[%d]: steps must be in time order", where, i)
			}
			for name, w := range st.Weights {
				if !names[name] {
					bad("%s[%d]: unknown deployment %q", where, i, name)
				}
				if !(w >= 0) || math.IsInf(w, 0) {
					bad("%s[%d]: weight of %q must be finite and >= 0", where, i, name)
				}
			}
		}
	}
	checkWeights("weights", sc.Weights)
	if sc.Ramp != nil {
		errs = append(errs, checkTarget("ramp", names, sc.Ramp.Target)...)
	}
	if sc.Focus != "" && !names[sc.Focus] {
		bad("focus: unknown deployment %q", sc.Focus)
	}
	if err := sc.Workload.validate(); err != nil {
		bad("workload: %v", err)
	}
	vnames := map[string]bool{}
	for i := range sc.Variants {
		v := &sc.Variants[i]
		where := fmt.Sprintf("variants[%d] (%s)", i, v.Name)
		if v.Name == "" || vnames[v.Name] {
			bad("%s: name must be set and unique", where)
		}
		vnames[v.Name] = true
		if !slices.Contains([]string{"", "router", "round_robin", "random", "affinity", "llmd"}, v.Picker) {
			bad("%s: picker must be router, round_robin, random, affinity or llmd", where)
		}
		if v.Optimistic != nil && v.Baseline() {
			bad("%s: optimistic applies to the router, not to picker %s", where, v.Picker)
		}
		if v.Gate != "" && v.Gate != "llmd" {
			bad("%s: gate must be llmd or unset", where)
		}
		if v.Outcomes && v.Baseline() {
			bad("%s: outcomes apply to the router, not to picker %s", where, v.Picker)
		}
		if v.Routers < 0 || v.Routers > 64 {
			bad("%s: routers must be in [0, 64]", where)
		}
		checkWeights(where+".weights", v.Weights)
		if v.Ramp != nil {
			errs = append(errs, checkTarget(where+".ramp", names, v.Ramp.Target)...)
		}
		if len(errs) == 0 {
			if _, err := sc.resolve(v); err != nil {
				bad("%v", err)
			}
		}
	}
	return errors.Join(errs...)
}
