package daemon

import (
	"context"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/server"
)

// TestRampGauges: prefixroute_ramp_state is 1 for the last ramp's state
// and 0 for the others, telling an operator's pause from an automatic
// one; the step gauges give its progress.
func TestRampGauges(t *testing.T) {
	d := obsStart(t, nil)
	_, _, admin := obsClients(t, d)
	c := context.Background()
	if _, err := admin.SetWeights(c, &pb.SetWeightsRequest{AllowNewPool: true, Pool: "chat", Weights: map[string]float64{"a": 1, "b": 0}}); err != nil {
		t.Fatal(err)
	}
	want := func(state string, applied, steps float64) {
		t.Helper()
		fams := obsScrape(t, d)
		for _, st := range server.RampStateLabels {
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
	r, err := admin.StartRamp(c, &pb.StartRampRequest{AllowNewPool: true, Pool: "chat", Target: map[string]float64{"b": 1},
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
