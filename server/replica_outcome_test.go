package server_test

import (
	"testing"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/internal/natstest"
	"github.com/prefixroute/prefixroute/internal/servertest"
)

// TestReplicasShareUnreachable: a gateway's failed connect reported to one
// replica excludes the instance on every replica (a dead server costs one
// failed connect in the cluster, not one per replica), and a served outcome
// reported to another replica brings it back everywhere.
func TestReplicasShareUnreachable(t *testing.T) {
	ns := natstest.Start(t)
	rs := startReplicas(t, ns.URL(), 2)
	report(rs[0], rep("m", "d", "a"))
	report(rs[0], rep("m", "d", "b"))
	for _, r := range rs {
		servertest.Eventually(t, "a and b ok on every replica", func() bool { return allOK(r, "m", 2) })
	}
	send := func(r *servertest.Sidecar, st pb.OutcomeStatus) {
		t.Helper()
		if _, err := r.Pick.ReportOutcome(ctx(t), &pb.ReportOutcomeRequest{Outcomes: []*pb.Outcome{outcome("m", "", "a", st)}}); err != nil {
			t.Fatal(err)
		}
	}
	stateOf := func(r *servertest.Sidecar) pb.InstanceState { return instances(r, "m")["a"].GetState() }
	const unreachable, ok = pb.InstanceState_INSTANCE_STATE_UNREACHABLE, pb.InstanceState_INSTANCE_STATE_OK

	send(rs[0], connectFailed)
	if got := stateOf(rs[0]); got != unreachable {
		t.Fatalf("replica 1 after its own connect_failed: a is %v, want unreachable", got)
	}
	servertest.Eventually(t, "a unreachable on replica 2", func() bool { return stateOf(rs[1]) == unreachable })
	for i := range 20 {
		seed := uint64(i + 1)
		p, err := rs[1].Pick.Pick(ctx(t), &pb.PickRequest{Pool: "m", PromptTokens: 100, Seed: &seed})
		if err != nil {
			t.Fatalf("pick %d on replica 2: %v", i, err)
		}
		if p.GetInstanceId() == "a" {
			t.Fatalf("pick %d on replica 2 chose a, excluded by replica 1's failed connect", i)
		}
	}

	send(rs[1], served)
	if got := stateOf(rs[1]); got != ok {
		t.Fatalf("replica 2 after a served outcome: a is %v, want ok", got)
	}
	servertest.Eventually(t, "a ok again on replica 1", func() bool { return stateOf(rs[0]) == ok })
}
