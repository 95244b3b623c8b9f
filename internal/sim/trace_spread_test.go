package sim

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"
)

// spreadScenario is a one-instance trace scenario with the given duration,
// trace_speed and trace_spread.
func spreadScenario(duration, speed, spread string) string {
	return fmt.Sprintf(`
name: spread
duration: %s
block_tokens: 16
deployments: [{name: a, instances: 1, prefill_tokens_per_second: 10000, kv_blocks: 100}]
workload: {trace: x.jsonl, trace_speed: %s, trace_spread: %s}
`, duration, speed, spread)
}

// replayTrace replays trace lines at the given ms (line i with i+1 prompt
// tokens) and returns the arrivals and the lines in the order yielded.
func replayTrace(t *testing.T, sc *Scenario, ms []float64) ([]time.Duration, []int) {
	t.Helper()
	var b strings.Builder
	for i, m := range ms {
		fmt.Fprintf(&b, "{\"t_ms\": %v, \"prompt_tokens\": %d}\n", m, i+1)
	}
	wl := newTraceWorkload(strings.NewReader(b.String()), sc)
	var at []time.Duration
	var lines []int
	for {
		r, err := wl.Next()
		if err != nil {
			t.Fatal(err)
		}
		if r == nil {
			return at, lines
		}
		if r.ID != uint64(len(at)) {
			t.Fatalf("request %d has ID %d", len(at), r.ID)
		}
		at = append(at, r.Arrival)
		lines = append(lines, int(r.PromptTokens)-1)
	}
}

// TestTraceSpread: the k-th of the n lines at a time t arrives at
// t + spread*k/n of the trace's time, divided by trace_speed, yielded in
// arrival order (ties in line order), cut at the duration.
func TestTraceSpread(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		name, duration, speed, spread string
		trace                         []float64
		want                          []time.Duration
		lines                         []int
	}{
		{"none", "10s", "1", "0s", []float64{0, 0, 0, 1000}, []time.Duration{0, 0, 0, 1000 * ms}, []int{0, 1, 2, 3}},
		{"3s windows", "10s", "1", "3s", []float64{0, 0, 0, 3000, 3000, 6000},
			[]time.Duration{0, 1000 * ms, 2000 * ms, 3000 * ms, 4500 * ms, 6000 * ms}, []int{0, 1, 2, 3, 4, 5}},
		{"before trace_speed", "10s", "2", "3s", []float64{0, 0, 0, 3000, 3000, 6000},
			[]time.Duration{0, 500 * ms, 1000 * ms, 1500 * ms, 2250 * ms, 3000 * ms}, []int{0, 1, 2, 3, 4, 5}},
		{"thirds round to the ns", "10s", "1", "1s", []float64{500, 500, 500},
			[]time.Duration{500 * ms, 833333333, 1166666667}, []int{0, 1, 2}},
		{"past the next group", "10s", "1", "5s", []float64{0, 0, 1000, 1000},
			[]time.Duration{0, 1000 * ms, 2500 * ms, 3500 * ms}, []int{0, 2, 1, 3}},
		{"ties in line order", "10s", "1", "2s", []float64{0, 0, 1000},
			[]time.Duration{0, 1000 * ms, 1000 * ms}, []int{0, 1, 2}},
		{"cut at the duration", "10s", "1", "3s", []float64{8000, 9000, 9000, 9000, 12000},
			[]time.Duration{8000 * ms, 9000 * ms}, []int{0, 1}},
		{"a lone line stays", "10s", "1", "3s", []float64{100, 200}, []time.Duration{100 * ms, 200 * ms}, []int{0, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc := parse(t, spreadScenario(tc.duration, tc.speed, tc.spread))
			at, lines := replayTrace(t, sc, tc.trace)
			if fmt.Sprint(at) != fmt.Sprint(tc.want) || fmt.Sprint(lines) != fmt.Sprint(tc.lines) {
				t.Fatalf("arrivals %v lines %v, want %v %v", at, lines, tc.want, tc.lines)
			}
		})
	}
}

// TestTraceSpreadLimits: trace_spread is in [0, 1h] and needs a trace; 1h
// itself spreads; a bad line is reported after the lines before it.
func TestTraceSpreadLimits(t *testing.T) {
	for _, tc := range []struct {
		spread string
		ok     bool
	}{{"0s", true}, {"1ns", true}, {"1h", true}, {"3600", true}, {"-1ns", false}, {"-3s", false},
		{"1h0m0.000000001s", false}, {"2h", false}} {
		_, err := ParseScenario([]byte(spreadScenario("10s", "1", tc.spread)))
		if tc.ok != (err == nil) || (err != nil && !strings.Contains(err.Error(), "trace_spread")) {
			t.Errorf("trace_spread %s: error %v, want ok %v or one naming trace_spread", tc.spread, err, tc.ok)
		}
	}
	if _, err := ParseScenario([]byte(oneInstance(1, "    - {name: u, share: 1, suffix_tokens: 100}\n  trace_spread: 3s"))); err == nil ||
		!strings.Contains(err.Error(), "trace_spread") {
		t.Errorf("trace_spread without a trace: error %v, want one naming trace_spread", err)
	}
	sc := parse(t, spreadScenario("3h", "1", "1h"))
	if at, _ := replayTrace(t, sc, []float64{0, 0, 0, 0}); fmt.Sprint(at) != "[0s 15m0s 30m0s 45m0s]" {
		t.Errorf("1h over 4 lines: arrivals %v", at)
	}
	wl := newTraceWorkload(strings.NewReader("{\"t_ms\": 0}\n{\"t_ms\": 0}\n{\"t_ms\": \"x\"}\n"), sc)
	for i := range 3 {
		r, err := wl.Next()
		if (i < 2) != (r != nil) || (i == 2) != (err != nil) {
			t.Fatalf("Next %d: %v, %v; want two requests, then the error", i, r, err)
		}
		if i == 2 && !strings.Contains(err.Error(), "trace line 3") {
			t.Fatalf("error %v, want one naming line 3", err)
		}
	}
}

// TestTraceSpreadMooncake: testdata/mooncake-slo-spread.yaml loads, and its
// first burst (10 lines at 0 ms) spreads over 3 s of the trace's time,
// 1.76 s of the replay at trace_speed 1.7; the next burst starts at 3 s.
func TestTraceSpreadMooncake(t *testing.T) {
	sc, err := LoadScenario("testdata/mooncake-slo-spread.yaml")
	if err != nil {
		t.Fatal(err)
	}
	wl, err := NewWorkload(sc, sc.Seed)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := wl.(interface{ Close() error }).Close(); err != nil {
			t.Error(err)
		}
	})
	for k := range 11 {
		r, err := wl.Next()
		if err != nil || r == nil {
			t.Fatalf("request %d: %v, %v", k, r, err)
		}
		want := time.Duration(math.Round(3000 * float64(k) / 10 / 1.7 * 1e6))
		if r.Arrival != want {
			t.Fatalf("request %d arrives at %v, want %v", k, r.Arrival, want)
		}
	}
}
