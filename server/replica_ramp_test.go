package server_test

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/internal/natstest"
	"github.com/prefixroute/prefixroute/internal/servertest"
)

// TestReplicasRampStepsOnceClusterWide: a ramp started on one replica is
// driven by every replica's ramp driver. When all three call AdvanceRamps
// at once at a step's due time, the step is applied exactly once in the
// cluster (one replica reports 1, the others 0), the weights version grows
// by exactly 1 per step, and every replica shows the same progress.
func TestReplicasRampStepsOnceClusterWide(t *testing.T) {
	ns := natstest.Start(t)
	rs := startReplicas(t, ns.URL(), 3)
	c := context.Background()
	const pool = "chat"

	if _, err := rs[0].Admin.SetWeights(c, &pb.SetWeightsRequest{AllowNewPool: true, Pool: pool, Weights: map[string]float64{"a": 1, "b": 0}}); err != nil {
		t.Fatal(err)
	}
	// Started at once on another replica, which may not have seen the
	// weights yet: it must start from them (or refuse, and be retried),
	// never from its older copy.
	const steps = 4
	var r *pb.StartRampResponse
	var err error
	refused := 0
	for {
		r, err = rs[1].Admin.StartRamp(c, &pb.StartRampRequest{AllowNewPool: true, Pool: pool, Target: map[string]float64{"a": 0, "b": 1},
			Duration: durationpb.New(steps * time.Minute), StepInterval: durationpb.New(time.Minute)})
		if status.Code(err) != codes.Aborted || refused > 100 {
			break
		}
		refused++
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("StartRamp on another replica right after SetWeights: refused %d times as prepared from a stale copy", refused)
	if got := r.GetRamp().GetStart(); !maps.Equal(got, map[string]float64{"a": 1, "b": 0}) {
		t.Fatalf("ramp started from %v, want the weights in force {a:1 b:0}", got)
	}
	if got := r.GetRamp().GetSteps()[0].GetWeights(); !maps.Equal(got, map[string]float64{"a": 0.75, "b": 0.25}) {
		t.Fatalf("first step %v, want {a:0.75 b:0.25}", got)
	}
	id := r.GetRamp().GetId()
	// progress is what a replica shows: weights version, steps applied,
	// weights and ramp state.
	type progress struct {
		version uint64
		applied uint32
		weights map[string]float64
		state   pb.RampState
	}
	show := func(e *servertest.Sidecar) progress {
		w, err := e.Admin.GetWeights(c, &pb.GetWeightsRequest{Pool: pool})
		if err != nil {
			return progress{}
		}
		return progress{w.GetVersion(), w.GetRamp().GetStepsApplied(), w.GetWeights(), w.GetRamp().GetState()}
	}
	same := func(a, b progress) bool {
		return a.version == b.version && a.applied == b.applied && a.state == b.state && maps.Equal(a.weights, b.weights)
	}
	for _, e := range rs {
		servertest.Eventually(t, "the ramp on every replica", func() bool {
			p := show(e)
			return p.version == 1 && p.state == pb.RampState_RAMP_STATE_RUNNING
		})
	}

	for step := 1; step <= steps; step++ {
		for _, e := range rs {
			e.Clock.Advance(time.Minute)
		}
		var wg sync.WaitGroup
		applied := make([]int, len(rs))
		for i, e := range rs {
			wg.Go(func() { applied[i] = e.D.Server().AdvanceRamps() })
		}
		wg.Wait()
		if n := applied[0] + applied[1] + applied[2]; n != 1 {
			t.Fatalf("step %d: applied %v times by the replicas (%v); want exactly once", step, n, applied)
		}
		var want progress
		servertest.Eventually(t, "replica 1 shows the step", func() bool {
			want = show(rs[0])
			return want.version == uint64(1+step)
		})
		for i, e := range rs {
			took := servertest.Eventually(t, fmt.Sprintf("replica %d shows step %d like replica 1 (%+v, now %+v)", i+1, step, want, show(e)), func() bool {
				p := show(e)
				if p.version == want.version && !same(p, want) {
					t.Fatalf("step %d: replica %d shows %+v, replica 1 %+v", step, i+1, p, want)
				}
				return same(p, want)
			})
			if i > 0 {
				t.Logf("step %d on replica %d %v after replica 1", step, i+1, took)
			}
		}
		if want.version != uint64(1+step) || want.applied != uint32(step) {
			t.Fatalf("after step %d: weights version %d, steps applied %d; want %d and %d",
				step, want.version, want.applied, 1+step, step)
		}
		// A second round at the same time applies nothing.
		for i, e := range rs {
			if n := e.D.Server().AdvanceRamps(); n != 0 {
				t.Fatalf("step %d: replica %d applied %d more steps at the same time", step, i+1, n)
			}
		}
	}
	for i, e := range rs {
		p := show(e)
		if p.state != pb.RampState_RAMP_STATE_DONE || p.version != 1+steps || !maps.Equal(p.weights, map[string]float64{"a": 0, "b": 1}) {
			t.Errorf("replica %d after the ramp: %+v", i+1, p)
		}
		g, err := e.Admin.GetRamp(c, &pb.GetRampRequest{Pool: pool})
		if err != nil || g.GetRamp().GetId() != id {
			t.Errorf("replica %d GetRamp: %v %v", i+1, g, err)
		}
	}
}
