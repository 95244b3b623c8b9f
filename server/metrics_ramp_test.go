package server

import (
	"testing"

	"github.com/prefixroute/prefixroute/internal/rollout"
)

// TestRampStateLabel: a pause is auto_held when auto-hold or the drain
// guard made it (their reasons, as stepRamp writes them), paused when an
// operator did.
func TestRampStateLabel(t *testing.T) {
	for _, tc := range []struct {
		state  rollout.State
		reason string
		want   string
	}{
		{rollout.Running, "", "running"},
		{rollout.Paused, "paused by 127.0.0.1:1", "paused"},
		{rollout.Paused, "auto-hold: step 2 would leave b 10.0% prefill headroom (< 20%)", "auto_held"},
		{rollout.Paused, `drain guard: step 2 of 2: the traffic of "a" ...`, "auto_held"},
		{rollout.Done, "all steps applied", "done"},
		{rollout.Aborted, "aborted by x", "aborted"},
	} {
		if got := rampStateLabel(&rollout.Ramp{State: tc.state, Reason: tc.reason}); got != tc.want {
			t.Errorf("%v %q: %q, want %q", tc.state, tc.reason, got, tc.want)
		}
	}
}
