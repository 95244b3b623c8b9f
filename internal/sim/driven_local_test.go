package sim

import (
	"errors"
	"slices"
	"testing"

	"github.com/prefixroute/prefixroute/internal/state"
	"github.com/prefixroute/prefixroute/scheduler"
)

// localYAML is a fleet of three instances with an llm-d-style, a
// round-robin and a router variant.
const localYAML = `
name: local
duration: 5s
block_tokens: 16
cache_events: true
deployments: [{name: a, instances: 3, prefill_tokens_per_second: 20000, kv_blocks: 100}]
workload: {rate: 1, classes: [{name: c, share: 1}]}
variants: [{name: ours}, {name: llmd, picker: llmd}, {name: rr, picker: round_robin}]
`

// TestDrivenLocal: a driven baseline variant has a Local picker that
// follows the reports it is given (the llm-d-style scorer goes where the
// cache events put the prompt's blocks, then away from a long waiting
// queue) and the weights; a router variant has none.
func TestDrivenLocal(t *testing.T) {
	sc, err := ParseScenario([]byte(localYAML))
	if err != nil {
		t.Fatal(err)
	}
	d, err := NewDriven(sc, "ours", DrivenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if d.Local() != nil {
		t.Error("the router variant has a local picker")
	}
	d, err = NewDriven(sc, "llmd", DrivenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	l := d.Local()
	if l == nil {
		t.Fatal("the llm-d-style variant has no local picker")
	}
	r := &Request{ID: 1, PromptTokens: 64, Hashes: []uint64{11, 12, 13, 14}}
	for k := range 3 {
		rep := &state.Report{KVCapacityBlocks: 100, ReportsCacheEvents: true}
		if k == 2 {
			rep.Stored = r.Hashes
		}
		if err := l.Report(0, k, rep); err != nil {
			t.Fatal(err)
		}
	}
	for range 10 {
		if got, err := l.Pick(0, r); err != nil || got != 2 {
			t.Fatalf("Pick = %d, %v; want instance 2, which holds the 4 blocks", got, err)
		}
	}
	// Instance 2 now reports 9 waiting requests and a full cache: its
	// prefix score (3) no longer beats the others' queue and KV scores (4).
	if err := l.Report(0, 2, &state.Report{WaitingRequests: 9, KVCacheUsage: 1, KVCapacityBlocks: 100}); err != nil {
		t.Fatal(err)
	}
	if got, err := l.Pick(0, r); err != nil || got == 2 {
		t.Fatalf("Pick = %d, %v; want instance 0 or 1", got, err)
	}
	if err := l.SetWeights(map[string]float64{"a": 0}, 2); err != nil {
		t.Fatal(err)
	}
	if got, err := l.Pick(0, r); !errors.Is(err, scheduler.ErrAllWeightsZero) {
		t.Fatalf("Pick with every weight 0 = %d, %v; want ErrAllWeightsZero", got, err)
	}

	d, err = NewDriven(sc, "rr", DrivenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	counts := make([]int, 3)
	for range 6 {
		k, err := d.Local().Pick(0, r)
		if err != nil {
			t.Fatal(err)
		}
		counts[k]++
	}
	if !slices.Equal(counts, []int{2, 2, 2}) {
		t.Errorf("round-robin picks per instance %v, want 2 each", counts)
	}
}
