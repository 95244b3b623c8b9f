package sim

import (
	"strconv"
	"strings"
	"testing"
)

// tinyYAML is a small two-deployment scenario with every workload class:
// enough to exercise the engine in well under a second.
const tinyYAML = `
name: tiny
seed: 11
duration: 30s
block_tokens: 16
report_interval: 50ms
cache_events: true
deployments:
  - {name: a, instances: 2, prefill_tokens_per_second: 20000, batch_overhead: 5ms, kv_blocks: 600, decode_per_token: 1ms, max_batch_tokens: 2048}
  - {name: b, instances: 2, prefill_tokens_per_second: 15000, batch_overhead: 5ms, kv_blocks: 600, decode_per_token: 1ms, max_batch_tokens: 2048}
weights:
  - {at: 0s, weights: {a: 1, b: 0}}
  - {at: 10s, weights: {a: 1, b: 9}}
  - {at: 20s, weights: {a: 0, b: 1}}
workload:
  rate: 60
  classes:
    - {name: shared, share: 0.4, groups: 30, zipf: 1.0, prefix_tokens: {dist: uniform, min: 100, max: 600}, suffix_tokens: {dist: uniform, min: 8, max: 100}, output_tokens: 20}
    - {name: chat, share: 0.5, kind: conversation, conversations: 25, prefix_tokens: 200, suffix_tokens: 50, user_tokens: {dist: uniform, min: 10, max: 60}, output_tokens: {dist: uniform, min: 10, max: 40}, turns: {dist: uniform, min: 2, max: 6}}
    - {name: tail, share: 0.1, groups: 1000, zipf: 0.5, prefix_tokens: {dist: lognormal, median: 300, sigma: 0.5, max: 2000}, suffix_tokens: 30}
variants:
  - {name: softmax}
  - {name: argmin, policy: {strategy: argmin}}
  - {name: threshold-noev, cache_events: false, policy: {strategy: threshold}}
  - {name: softmax-3r, routers: 3, policy: {lambda_h: 0}}
  - {name: rr, picker: round_robin}
  - {name: random, picker: random}
  - {name: affinity, picker: affinity}
`

// parse parses a scenario, failing the test on error.
func parse(t testing.TB, y string) *Scenario {
	t.Helper()
	sc, err := ParseScenario([]byte(y))
	if err != nil {
		t.Fatalf("ParseScenario: %v", err)
	}
	return sc
}

// run runs one variant, failing the test on error.
func run(t testing.TB, sc *Scenario, variant string, opts RunOptions) *Result {
	t.Helper()
	res, err := Run(sc, variant, opts)
	if err != nil {
		t.Fatalf("Run %s/%s: %v", sc.Name, variant, err)
	}
	return res
}

// oneInstance is a scenario with a single instance and uniform arrivals,
// whose timings are known exactly; workload is spliced in.
func oneInstance(instances int, workload string) string {
	return strings.NewReplacer("INSTANCES", strconv.Itoa(instances), "WORKLOAD", workload).Replace(`
name: exact
seed: 5
duration: 20s
block_tokens: 16
report_interval: 50ms
deployments:
  - {name: a, instances: INSTANCES, prefill_tokens_per_second: 10000, batch_overhead: 5ms, kv_blocks: 100000}
workload:
  rate: 1
  arrivals: uniform
  classes:
WORKLOAD
variants:
  - {name: softmax}
  - {name: softmax-noev, cache_events: false}
`)
}
