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
