package simout

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/prefixroute/prefixroute/internal/sim"
)

// TestRoutesCSV: WriteRoutesCSV and ReadRoutesCSV round-trip a run's
// arrival-to-queued times; malformed rows are refused.
func TestRoutesCSV(t *testing.T) {
	res := &sim.Result{Records: []sim.Record{{ID: 3, Routed: 7 * time.Millisecond}, {ID: 4}, {ID: 9, Routed: 1500 * time.Microsecond}}}
	var b bytes.Buffer
	if err := WriteRoutesCSV(&b, res); err != nil {
		t.Fatal(err)
	}
	got, err := ReadRoutesCSV(&b)
	if err != nil || len(got) != 3 || got[3] != 7*time.Millisecond || got[4] != 0 || got[9] != 1500*time.Microsecond {
		t.Fatalf("round trip: %v, %v", got, err)
	}
	for _, bad := range []string{"request,routed_ms\nx,1\n", "request,routed_ms\n1,-1\n", "request,routed_ms\n1\n"} {
		if _, err := ReadRoutesCSV(strings.NewReader(bad)); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestLabel: baselines are marked, the llm-d-style scorer as precise
// prefix.
func TestLabel(t *testing.T) {
	for _, tc := range []struct {
		s    Summary
		want string
	}{
		{Summary{Variant: "softmax"}, "softmax"},
		{Summary{Variant: "rr", Baseline: true, Picker: "round_robin"}, "rr (baseline)"},
		{Summary{Variant: "llm-d-style", Baseline: true, Picker: "llmd"}, "llm-d-style (precise prefix, baseline)"},
	} {
		if got := tc.s.Label(); got != tc.want {
			t.Errorf("Label() = %q, want %q", got, tc.want)
		}
	}
}

// TestRequestsCSV: one row per served request, every column in order, in
// virtual ms.
func TestRequestsCSV(t *testing.T) {
	res := &sim.Result{Instances: []sim.InstanceStats{{ID: "a-0"}, {ID: "a-1"}}, Records: []sim.Record{
		{ID: 7, Arrival: 1500 * time.Millisecond, Routed: 2 * time.Millisecond, Instance: 1, Prompt: 4096, Hit: 2048,
			Predicted: 1024, PredictedMs: 130.5, PredictedQueueMs: 80, AheadMs: 95.25, OwnMs: 40, Wait: 100 * time.Millisecond,
			TTFT: 150 * time.Millisecond, TargetMs: 500},
		{ID: 8, Instance: 0, Prompt: 16, TTFT: time.Millisecond},
	}}
	var b bytes.Buffer
	if err := WriteRequestsCSV(&b, res); err != nil {
		t.Fatal(err)
	}
	want := "request,arrival_ms,routed_ms,instance,prompt_tokens,hit_tokens,predicted_hit_tokens,predicted_ms,predicted_queue_ms,ahead_ms,own_prefill_ms,wait_ms,ttft_ms,target_ms\n" +
		"7,1500.000,2.000,a-1,4096,2048,1024,130.500,80.000,95.250,40.000,100.000,150.000,500.000\n" +
		"8,0.000,0.000,a-0,16,0,0,0.000,0.000,0.000,0.000,0.000,1.000,0.000\n"
	if got := b.String(); got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}
