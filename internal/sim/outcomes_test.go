package sim

import (
	"strings"
	"testing"
)

// sloYAML is a 4-instance fleet whose attention term (doubling context
// 4,000 tokens) is four times the router's prior, with long shared
// prompts, every request carrying a TTFT target.
const sloYAML = `
name: slo
seed: 3
duration: 60s
warmup: 5s
block_tokens: 16
report_interval: 50ms
cache_events: true
deployments:
  - {name: a, instances: 4, prefill_tokens_per_second: 20000, batch_overhead: 5ms, kv_blocks: 20000, max_batch_tokens: 8192, doubling_context_tokens: 4000}
workload:
  rate: 12
  ttft_slo_ms: TARGET
  classes:
    - {name: long, share: 1, groups: 40, zipf: 1.0, prefix_tokens: {dist: uniform, min: 2000, max: 8000}, suffix_tokens: {dist: uniform, min: 100, max: 2000}, output_tokens: 10}
variants:
  - {name: prior}
  - {name: outcomes, outcomes: true}
  - {name: shed, outcomes: true, policy: {on_slo_miss: shed}}
`

// TestOutcomesLearn: with outcomes the router's fit learns the fleet's
// attention term and its predicted TTFTs come within 10 % (median) of what
// happened, where the prior's are off by over 15 %; every routed request
// records its prediction and target, and under on_slo_miss shed the
// requests no instance can serve in time are rejected, not served late
// (the fit learning as it sheds).
func TestOutcomesLearn(t *testing.T) {
	sc := parse(t, strings.Replace(sloYAML, "TARGET", "400", 1))
	medianErr := func(res *Result) float64 {
		var errs []float64
		queued := 0
		for _, r := range res.Records {
			if r.Arrival < res.Warmup {
				continue
			}
			if r.PredictedMs <= 0 || r.TargetMs != 400 || !(r.PredictedQueueMs >= 0 && r.PredictedQueueMs < r.PredictedMs) {
				t.Fatalf("record %+v lacks its prediction or target, or its queue part is not in [0, predicted)", r)
			}
			if r.PredictedQueueMs > 0 {
				queued++
			}
			act := float64(r.TTFT) / 1e6
			e := (float64(r.PredictedMs) - act) / act
			errs = append(errs, max(e, -e))
		}
		if queued == 0 {
			t.Fatalf("%s: no request was priced behind a queue", res.Variant.Name)
		}
		return median(errs)
	}
	prior, learned := medianErr(run(t, sc, "prior", RunOptions{})), medianErr(run(t, sc, "outcomes", RunOptions{}))
	if prior < 0.15 || learned > 0.10 {
		t.Fatalf("median |predicted - actual| / actual: prior %.3f, with outcomes %.3f; want > 0.15 and <= 0.10", prior, learned)
	}
	shed := run(t, sc, "shed", RunOptions{})
	late := 0
	for _, r := range shed.Records {
		if float64(r.TTFT)/1e6 > 400 {
			late++
		}
	}
	if len(shed.Rejected) == 0 || late*20 > len(shed.Records) {
		t.Fatalf("shed: %d rejected, %d of %d served late; want some rejected and at most 5 %% late", len(shed.Rejected), late, len(shed.Records))
	}
}

// TestOutcomesValidate: outcomes are the router's, and the target in range.
func TestOutcomesValidate(t *testing.T) {
	for _, tc := range []struct{ edit, want string }{
		{"  - {name: prior}\n", "outcomes apply to the router, not to picker random"},
		{"ttft_slo_ms: TARGET", "ttft_slo_ms is -1: want 0 (none) or a number of ms in (0, 3600000]"},
	} {
		y := strings.Replace(sloYAML, "TARGET", "400", 1)
		if tc.edit == "  - {name: prior}\n" {
			y = strings.Replace(y, tc.edit, "  - {name: r, picker: random, outcomes: true}\n", 1)
		} else {
			y = strings.Replace(sloYAML, "TARGET", "-1", 1)
		}
		if _, err := ParseScenario([]byte(y)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want an error with %q", tc.want, err, tc.want)
		}
	}
}

func median(v []float64) float64 {
	s := append([]float64(nil), v...)
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
}
