package sim

import (
	"strings"
	"testing"
	"time"
)

func TestBuiltinScenarios(t *testing.T) {
	names := ScenarioNames()
	for _, want := range []string{"hotspot", "cutover", "canary", "smoke", "rampcutover"} {
		sc, err := LoadScenario(want)
		if err != nil {
			t.Fatalf("%s: %v (built in: %v)", want, err, names)
		}
		if sc.Name != want || len(sc.Variants) < 2 {
			t.Fatalf("%s: name %q, %d variants", want, sc.Name, len(sc.Variants))
		}
	}
	if _, err := LoadScenario("nosuch"); err == nil || !strings.Contains(err.Error(), "built in") {
		t.Fatalf("unknown scenario: %v", err)
	}
}

func TestScenarioDefaults(t *testing.T) {
	sc := parse(t, `
name: d
duration: 1m
deployments: [{name: x, instances: 1, prefill_tokens_per_second: 1000, kv_blocks: 10}]
workload: {rate: 1, classes: [{name: c, share: 1, kind: conversation}]}
`)
	if sc.Seed != 1 || sc.Pool != "sim" || sc.BlockTokens != 16 || sc.ReportInterval.D() != 50*time.Millisecond ||
		sc.Routers != 1 || sc.Focus != "x" || len(sc.Variants) != 1 || sc.Deployments[0].MaxBatchTokens != 8192 {
		t.Fatalf("defaults: %+v", sc)
	}
	c := sc.Workload.Classes[0]
	if c.Conversations != 100 || c.Turns != Const(5) || c.MaxPromptTokens != 32768 {
		t.Fatalf("conversation defaults: %+v", c)
	}
}

func TestScenarioErrors(t *testing.T) {
	base := `
name: e
duration: 1m
deployments: [{name: x, instances: 1, prefill_tokens_per_second: 1000, kv_blocks: 10}]
workload: {rate: 1, classes: [{name: c, share: 1}]}
`
	for _, tc := range []struct{ name, extra, want string }{
		{"unknown field", "colour: red", "field colour not found"},
		{"bad duration", "warmup: soon", `duration "soon"`},
		{"warmup too long", "warmup: 2m", "warmup must be in"},
		{"schedule not at 0", "weights: [{at: 5s, weights: {x: 1}}]", "first step must be at 0"},
		{"unknown deployment", "weights: [{at: 0s, weights: {y: 1}}]", `unknown deployment "y"`},
		{"bad picker", "variants: [{name: v, picker: magic}]", "picker must be"},
		{"bad strategy", "variants: [{name: v, policy: {strategy: best}}]", "strategy must be"},
		{"bad delta", "variants: [{name: v, policy: {delta_ms: -1}}]", "delta_ms must be in [0.001, 1000000] ms, got -1"},
		{"duplicate variant", "variants: [{name: v}, {name: v}]", "unique"},
		// the backlog weight and the queue ledger are the model, not variant switches
		{"backlog_weight is no switch", "variants: [{name: v, backlog_weight: true}]", "field backlog_weight not found"},
		{"queue_ledger is no switch", "variants: [{name: v, queue_ledger: false}]", "field queue_ledger not found"},
		{"optimistic on a baseline", "variants: [{name: v, picker: llmd, optimistic: false}]", "optimistic applies to the router, not to picker llmd"},
		{"trace and classes", "routers: 2\nfocus: x", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseScenario([]byte(base + tc.extra))
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
	if _, err := ParseScenario([]byte(strings.Replace(base, "workload: {rate: 1,", "workload: {trace: t.jsonl, rate: 1,", 1))); err == nil {
		t.Fatal("trace with classes accepted")
	}
}

func TestBaselines(t *testing.T) {
	sc := parse(t, `
name: b
duration: 60s
deployments: [{name: x, instances: 3, prefill_tokens_per_second: 100000, kv_blocks: 1000}]
workload: {rate: 20, classes: [{name: c, share: 1, groups: 10, zipf: 1, prefix_tokens: 64, suffix_tokens: 8}]}
variants: [{name: rr, picker: round_robin}, {name: random, picker: random}, {name: affinity, picker: affinity}]
`)
	rr := run(t, sc, "rr", RunOptions{})
	lo, hi := rr.Instances[0].Requests, rr.Instances[0].Requests
	for _, in := range rr.Instances {
		lo, hi = min(lo, in.Requests), max(hi, in.Requests)
	}
	if hi-lo > 1 {
		t.Fatalf("round-robin split %v", rr.Instances)
	}
	rnd := run(t, sc, "random", RunOptions{})
	for _, in := range rnd.Instances {
		if in.Requests < uint64(rnd.Generated)/6 {
			t.Fatalf("random starved %s: %v", in.ID, rnd.Instances)
		}
	}
	aff := run(t, sc, "affinity", RunOptions{})
	wl, _ := NewWorkload(sc, sc.Seed)
	first := map[uint64]uint64{} // request -> first block
	for r, _ := wl.Next(); r != nil; r, _ = wl.Next() {
		first[r.ID] = r.Hashes[0]
	}
	where := map[uint64]int32{}
	for _, r := range aff.Records {
		if k, ok := where[first[r.ID]]; ok && k != r.Instance {
			t.Fatalf("affinity sent one prefix to instances %d and %d", k, r.Instance)
		}
		where[first[r.ID]] = r.Instance
	}
}
