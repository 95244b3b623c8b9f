package server_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/daemon"
	"github.com/prefixroute/prefixroute/internal/natstest"
	"github.com/prefixroute/prefixroute/internal/servertest"
	"github.com/prefixroute/prefixroute/internal/testwait"
)

// TestReplicaReportWakesWaitingPicks: a pick waiting on replica r2 for a
// pool saturated by an instance that reports to r1 is granted when r1's
// report that frees capacity reaches r2, not at r2's next sweep (set to an
// hour here, so only the replicated report can wake it).
func TestReplicaReportWakesWaitingPicks(t *testing.T) {
	ns := natstest.Start(t)
	r1 := servertest.Start(t, servertest.Replica(ns.URL(), "r1"))
	r2 := servertest.Start(t, servertest.Replica(ns.URL(), "r2"),
		servertest.Config(func(c *daemon.Config) { c.Server.SweepInterval = time.Hour }))
	if _, err := r1.Admin.SetPolicy(ctx(t), &pb.SetPolicyRequest{AllowNewPool: true, Pool: "m", Policy: &pb.Policy{
		OnSaturation: pb.OnSaturation_ON_SATURATION_QUEUE, MaxQueueMs: f64(200), QueueTtl: durationpb.New(10 * time.Minute)}}); err != nil {
		t.Fatal(err)
	}
	testwait.Eventually(t, "the policy on r2", func() bool {
		p, err := r2.Admin.GetPolicy(context.Background(), &pb.GetPolicyRequest{Pool: "m"})
		return err == nil && p.GetPolicy().GetOnSaturation() == pb.OnSaturation_ON_SATURATION_QUEUE
	})
	full := rep("m", "d", "a")
	full.QueueMs = f64(500)
	in := report(r1, full)
	testwait.Eventually(t, "the full instance on r2", func() bool {
		st := instances(r2, "m")["a"]
		return st != nil && st.GetState() == pb.InstanceState_INSTANCE_STATE_OK
	})
	picked := make(chan *pb.PickResponse, 1)
	failed := make(chan error, 1)
	go func() {
		resp, err := r2.Pick.Pick(ctx(t), &pb.PickRequest{Pool: "m", PromptTokens: 100})
		if err != nil {
			failed <- err
			return
		}
		picked <- resp
	}()
	testwait.Eventually(t, "the pick waits on r2", func() bool { return waiting(r2, "m") == 1 })
	free := rep("m", "d", "a")
	free.QueueMs = f64(0)
	in.send(free)
	testwait.Eventually(t, "the pick on r2 granted after r1's report that freed capacity", func() bool {
		return len(picked)+len(failed) > 0
	})
	select {
	case resp := <-picked:
		if resp.GetInstanceId() != "a" {
			t.Fatalf("picked %q, decision %v; want a", resp.GetInstanceId(), resp.GetDecision())
		}
	case err := <-failed:
		t.Fatalf("the waiting pick failed: %v", err)
	}
	// The pick's 100 uncached tokens are 7 blocks of 16 on both replicas
	// (r1 from r2's pick event), in ListInstances.
	for i, r := range []*servertest.Sidecar{r1, r2} {
		testwait.Eventually(t, fmt.Sprintf("r%d lists the pick's 7 KV blocks", i+1), func() bool {
			st := instances(r, "m")["a"]
			return st != nil && st.GetAssignedKvBlocks() == 7
		})
	}
}
