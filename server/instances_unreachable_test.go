package server_test

import (
	"testing"
	"time"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/internal/servertest"
	"github.com/prefixroute/prefixroute/internal/state"
)

// TestListInstancesUnreachable: ListInstances shows an instance that a
// connect_failed outcome excluded as UNREACHABLE, with the back-off left
// (on the sidecar's clock), and OK again once a served outcome restores it.
func TestListInstancesUnreachable(t *testing.T) {
	e := servertest.Start(t)
	report(e, rep("m", "d", "a"))
	report(e, rep("m", "d", "b"))
	states := func() map[string]*pb.InstanceStatus {
		t.Helper()
		resp, err := e.Admin.ListInstances(ctx(t), &pb.ListInstancesRequest{Pool: "m"})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]*pb.InstanceStatus{}
		for _, in := range resp.GetInstances() {
			out[in.GetInstanceId()] = in
		}
		return out
	}
	outcome := func(st pb.OutcomeStatus) {
		t.Helper()
		if _, err := e.Pick.ReportOutcome(ctx(t), &pb.ReportOutcomeRequest{Outcomes: []*pb.Outcome{outcome("m", "", "a", st)}}); err != nil {
			t.Fatal(err)
		}
	}
	const ok, unreachable = pb.InstanceState_INSTANCE_STATE_OK, pb.InstanceState_INSTANCE_STATE_UNREACHABLE
	outcome(connectFailed)
	e.Clock.Advance(2 * time.Second)
	for _, step := range []struct {
		name      string
		do        func()
		a         pb.InstanceState
		leftMs    float64
		untouched pb.InstanceState // b
	}{
		{"2 s after connect_failed", func() {}, unreachable, float64((state.UnreachableBackoff - 2*time.Second).Milliseconds()), ok},
		{"served", func() { outcome(served) }, ok, 0, ok},
	} {
		step.do()
		got := states()
		if a := got["a"]; a.GetState() != step.a || a.GetUnreachableBackoffLeftMs() != step.leftMs {
			t.Errorf("%s: a is %v with %v ms of back-off left, want %v with %v ms", step.name,
				a.GetState(), a.GetUnreachableBackoffLeftMs(), step.a, step.leftMs)
		}
		if b := got["b"]; b.GetState() != step.untouched {
			t.Errorf("%s: b is %v, want %v", step.name, b.GetState(), step.untouched)
		}
	}
}
