package server

import (
	"context"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/internal/rollout"
)

// TestRampGauges: prefixroute_ramp_state is 1 for the last ramp's state
// and 0 for the others, telling an operator's pause from an automatic
// one; the step gauges give its progress.
func TestRampGauges(t *testing.T) {
	d := obsStart(t, nil)
	_, _, admin := obsClients(t, d)
	c := context.Background()
	if _, err := admin.SetWeights(c, &pb.SetWeightsRequest{Pool: "chat", Weights: map[string]float64{"a": 1, "b": 0}}); err != nil {
		t.Fatal(err)
	}
	want := func(state string, applied, steps float64) {
		t.Helper()
		fams := obsScrape(t, d)
		for _, st := range rampStateLabels {
			v := 0.0
			if st == state {
				v = 1
			}
			if got := obsValue(t, fams, "prefixroute_ramp_state", map[string]string{"pool": "chat", "state": st}); got != v {
				t.Errorf("ramp_state{state=%q} = %v, want %v", st, got, v)
			}
		}
		if got := obsValue(t, fams, "prefixroute_ramp_steps_applied", map[string]string{"pool": "chat"}); got != applied {
			t.Errorf("steps applied %v, want %v", got, applied)
		}
		if got := obsValue(t, fams, "prefixroute_ramp_steps", map[string]string{"pool": "chat"}); got != steps {
			t.Errorf("steps %v, want %v", got, steps)
		}
	}
	r, err := admin.StartRamp(c, &pb.StartRampRequest{Pool: "chat", Target: map[string]float64{"b": 1},
		Duration: durationpb.New(4 * time.Hour), StepInterval: durationpb.New(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	want("running", 0, 4)
	id := r.GetRamp().GetId()
	if _, err := admin.PauseRamp(c, &pb.PauseRampRequest{Pool: "chat", RampId: id}); err != nil {
		t.Fatal(err)
	}
	want("paused", 0, 4)
	if _, err := admin.AbortRamp(c, &pb.AbortRampRequest{Pool: "chat", RampId: id}); err != nil {
		t.Fatal(err)
	}
	want("aborted", 0, 4)
}

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
