package sim

import (
	"strings"
	"testing"
	"time"
)

// TestRouteDelays: a replayed route delay queues the request that much
// later, so its TTFT grows by exactly the delay (107.941176 ms + 7 ms), and
// Routed records it.
func TestRouteDelays(t *testing.T) {
	sc := parse(t, oneInstance(1, "    - {name: u, share: 1, suffix_tokens: 1000}"))
	res := run(t, sc, "softmax", RunOptions{RouteDelays: map[uint64]time.Duration{3: 7 * time.Millisecond}, LiveDraws: true})
	for _, r := range res.Records {
		want, routed := 107941176*time.Nanosecond, time.Duration(0)
		if r.ID == 3 {
			want, routed = 114941176*time.Nanosecond, 7*time.Millisecond
		}
		if r.TTFT != want || r.Routed != routed {
			t.Fatalf("request %d: TTFT %v routed %v, want %v, %v", r.ID, r.TTFT, r.Routed, want, routed)
		}
	}
}

// TestTraceSpeed: trace_speed divides the trace's times.
func TestTraceSpeed(t *testing.T) {
	sc := parse(t, `
name: ts
duration: 10s
block_tokens: 16
deployments: [{name: a, instances: 1, prefill_tokens_per_second: 10000, kv_blocks: 100}]
workload: {trace: x.jsonl, trace_speed: 4}
`)
	wl := newTraceWorkload(strings.NewReader(`{"timestamp": 0, "input_length": 32, "hash_ids": [1, 2]}
{"timestamp": 8000, "input_length": 32, "hash_ids": [1, 3]}
{"timestamp": 40000, "input_length": 32, "hash_ids": [1]}
`), sc)
	var at []time.Duration
	for r, err := wl.Next(); r != nil || err != nil; r, err = wl.Next() {
		if err != nil {
			t.Fatal(err)
		}
		at = append(at, r.Arrival)
	}
	// 40 s / 4 = 10 s is the duration's end: not replayed.
	if len(at) != 2 || at[1] != 2*time.Second {
		t.Fatalf("arrivals %v, want [0s 2s]", at)
	}
	if _, err := ParseScenario([]byte(`
name: ts
duration: 10s
deployments: [{name: a, instances: 1, prefill_tokens_per_second: 10000, kv_blocks: 100}]
workload: {trace: x.jsonl, trace_speed: -1}
`)); err == nil || !strings.Contains(err.Error(), "trace_speed") {
		t.Fatalf("trace_speed -1: %v", err)
	}
}
