package server_test

import (
	"context"
	"fmt"
	"maps"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/internal/natstest"
	"github.com/prefixroute/prefixroute/internal/servertest"
)

// startReplicas runs n daemons joined through the NATS server at url,
// each with its own data dir and fake clock.
func startReplicas(t *testing.T, url string, n int) []*servertest.Sidecar {
	t.Helper()
	out := make([]*servertest.Sidecar, n)
	for i := range out {
		out[i] = servertest.Start(t, servertest.Replica(url, fmt.Sprintf("r%d", i+1)))
	}
	return out
}

func TestReplicasShareReportsAndWeights(t *testing.T) {
	ns := natstest.Start(t)
	rs := startReplicas(t, ns.URL(), 3)
	c := context.Background()

	// A report sent to replica 1 makes replicas 2 and 3 route to it.
	in := report(rs[0], rep("chat", "a", "a-0"))
	for _, r := range rs[1:] {
		took := servertest.Eventually(t, "report seen on another replica", func() bool {
			p, err := r.Pick.Pick(c, &pb.PickRequest{Pool: "chat", PromptTokens: 16})
			return err == nil && p.GetInstanceId() == "a-0"
		})
		t.Logf("report on r1 routable on another replica after %v", took)
	}

	// Weights set on one replica are on all (b, never seen, needs
	// allow_drain).
	if _, err := rs[1].Admin.SetWeights(c, &pb.SetWeightsRequest{AllowNewPool: true, Pool: "chat", Weights: map[string]float64{"a": 3, "b": 1}, AllowDrain: true}); err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		servertest.Eventually(t, "weights on every replica", func() bool {
			w, err := r.Admin.GetWeights(c, &pb.GetWeightsRequest{Pool: "chat"})
			return err == nil && w.GetVersion() == 1 && maps.Equal(w.GetWeights(), map[string]float64{"a": 3, "b": 1})
		})
	}

	// Two conflicting compare-and-sets on two replicas, 20 rounds (the pair
	// changes every round): exactly one wins each round, the other is told
	// Aborted, and the version grows by exactly one per round.
	version := uint64(1)
	for round := range 20 {
		pair := []*servertest.Sidecar{rs[round%3], rs[(round+1)%3]}
		type result struct {
			resp *pb.SetWeightsResponse
			err  error
		}
		results := make(chan result, 2)
		start := make(chan struct{})
		for i, r := range pair {
			go func() {
				<-start
				resp, err := r.Admin.SetWeights(c, &pb.SetWeightsRequest{AllowNewPool: true, Pool: "chat", ExpectedVersion: version,
					Weights: map[string]float64{"a": float64(round*2 + i + 1)}})
				results <- result{resp, err}
			}()
		}
		close(start)
		won, lost := 0, 0
		var winner map[string]float64
		for range 2 {
			switch res := <-results; status.Code(res.err) {
			case codes.OK:
				won++
				winner = res.resp.GetWeights()
			case codes.Aborted:
				lost++
			default:
				t.Fatalf("round %d: conflicting SetWeights: %v", round, res.err)
			}
		}
		if won != 1 || lost != 1 {
			t.Fatalf("round %d: conflicting SetWeights: %d won, %d lost; want exactly one winner", round, won, lost)
		}
		version++
		for _, r := range rs {
			servertest.Eventually(t, "the winner's version on every replica", func() bool {
				w, err := r.Admin.GetWeights(c, &pb.GetWeightsRequest{Pool: "chat"})
				return err == nil && w.GetVersion() == version && maps.Equal(w.GetWeights(), winner)
			})
		}
	}

	// The instance's stream ends on replica 1: the others see it disconnected.
	in.close()
	for _, r := range rs[1:] {
		servertest.Eventually(t, "disconnect seen on another replica", func() bool {
			l, err := r.Admin.ListInstances(c, &pb.ListInstancesRequest{Pool: "chat"})
			return err == nil && len(l.GetInstances()) == 1 &&
				l.GetInstances()[0].GetState() == pb.InstanceState_INSTANCE_STATE_DISCONNECTED
		})
	}
}

// TestReplicaReadsItsOwnWrites: a replica's own change comes back through
// the bucket's watch after it was acknowledged; an older revision arriving
// then must not roll the replica back. After every acknowledged SetWeights
// the same replica reports that version (or a newer one), never an older.
func TestReplicaReadsItsOwnWrites(t *testing.T) {
	ns := natstest.Start(t)
	rs := startReplicas(t, ns.URL(), 2)
	c := context.Background()
	rolledBack := 0
	for i := range 100 {
		r := rs[0]
		if i%10 == 9 { // now and then a change from the other replica
			r = rs[1]
		}
		var resp *pb.SetWeightsResponse
		var err error
		for range 100 { // Aborted: prepared from a copy behind the bucket
			if resp, err = r.Admin.SetWeights(c, &pb.SetWeightsRequest{AllowNewPool: true, Pool: "chat",
				Weights: map[string]float64{"a": float64(i + 1)}}); status.Code(err) != codes.Aborted {
				break
			}
		}
		if err != nil {
			t.Fatal(err)
		}
		for range 3 {
			w, err := r.Admin.GetWeights(c, &pb.GetWeightsRequest{Pool: "chat"})
			if err != nil {
				t.Fatal(err)
			}
			if w.GetVersion() < resp.GetVersion() {
				rolledBack++
				t.Errorf("change %d acknowledged at version %d, then the same replica shows version %d %v",
					i, resp.GetVersion(), w.GetVersion(), w.GetWeights())
			}
		}
	}
	if rolledBack > 0 {
		t.Logf("%d reads rolled back", rolledBack)
	}
}

// TestReplicasConcurrentSetPolicyMerge: two replicas change different policy
// fields at once; the loser of the compare-and-set merges into the winner's
// policy, so both fields land, on every replica.
func TestReplicasConcurrentSetPolicyMerge(t *testing.T) {
	ns := natstest.Start(t)
	rs := startReplicas(t, ns.URL(), 2)
	c := context.Background()
	for round := range 5 {
		delta, lambda := float64(30+round), float64(5+round)
		errs := make(chan error, 2)
		// set retries on Aborted, as a client is told to (a replica whose
		// local copy was behind refuses once, after refreshing it).
		set := func(r *servertest.Sidecar, p *pb.Policy) {
			var err error
			for range 5 {
				if _, err = r.Admin.SetPolicy(c, &pb.SetPolicyRequest{AllowNewPool: true, Pool: "chat", Policy: p}); status.Code(err) != codes.Aborted {
					break
				}
			}
			errs <- err
		}
		go set(rs[0], &pb.Policy{DeltaMs: &delta})
		go set(rs[1], &pb.Policy{LambdaH: &lambda})
		for range 2 {
			if err := <-errs; err != nil {
				t.Fatalf("round %d: SetPolicy: %v", round, err)
			}
		}
		for _, r := range rs {
			servertest.Eventually(t, "both fields on every replica", func() bool {
				p, err := r.Admin.GetPolicy(c, &pb.GetPolicyRequest{Pool: "chat"})
				return err == nil && p.GetPolicy().GetDeltaMs() == delta && p.GetPolicy().GetLambdaH() == lambda
			})
		}
	}
}
