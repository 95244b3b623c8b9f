package server_test

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/internal/natstest"
	"github.com/prefixroute/prefixroute/internal/servertest"
)

// TestReplicasSurviveNATSOutage: three replicas with reports flowing to
// each. NATS stops: every replica keeps routing on its last view and its
// own reports, and every configuration change answers Unavailable saying
// nothing was changed. NATS comes back: the links reconnect, a change on
// one replica reaches all, and a report sent to replica 1 shapes picks on
// replica 2 again. Then replica 3 alone loses NATS (a proxy in front of
// it is cut): a change made on replica 2 meanwhile reaches replica 3 when
// it is back.
func TestReplicasSurviveNATSOutage(t *testing.T) {
	ns := natstest.Start(t)
	proxy := natstest.StartProxy(t, ns.Addr())
	rs := []*servertest.Sidecar{
		servertest.Start(t, servertest.Replica(ns.URL(), "r1")),
		servertest.Start(t, servertest.Replica(ns.URL(), "r2")),
		servertest.Start(t, servertest.Replica(proxy.URL(), "r3")),
	}
	c := context.Background()
	const pool = "chat"
	ids := []string{"a-1", "a-2", "a-3"}
	var busy atomic.Bool // a-1 reports a huge queue
	for i, r := range rs {
		id := ids[i]
		in := report(r, rep(pool, "a", id))
		// 40 reports/s: under the default limit of 50, which would end the
		// stream once the burst is spent.
		reportLoop(t, in, 25*time.Millisecond, func() *pb.ReportLoadRequest {
			m := rep(pool, "a", id)
			if id == "a-1" && busy.Load() {
				m.QueueMs = f64(1e6)
			}
			return m
		})
	}
	for _, r := range rs {
		servertest.Eventually(t, "every instance on every replica", func() bool { return allOK(r, pool, len(ids)) })
	}
	weightsAt := func(r *servertest.Sidecar, version uint64, want map[string]float64) func() bool {
		return func() bool {
			w, err := r.Admin.GetWeights(c, &pb.GetWeightsRequest{Pool: pool})
			return err == nil && w.GetVersion() == version && maps.Equal(w.GetWeights(), want)
		}
	}
	w1 := map[string]float64{"a": 1}
	if _, err := rs[0].Admin.SetWeights(c, &pb.SetWeightsRequest{AllowNewPool: true, Pool: pool, Weights: w1}); err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		servertest.Eventually(t, "weights v1 on every replica", weightsAt(r, 1, w1))
	}
	picks := func(r *servertest.Sidecar, n int) map[string]int {
		t.Helper()
		got := map[string]int{}
		for range n {
			p, err := r.Pick.Pick(c, &pb.PickRequest{Pool: pool, PromptTokens: 64})
			if err != nil {
				t.Fatalf("pick: %v", err)
			}
			got[p.GetInstanceId()]++
		}
		return got
	}

	// NATS stops.
	ns.Stop()
	stopped := time.Now()
	for i, r := range rs {
		took := servertest.Eventually(t, "link down on every replica", func() bool { return linkUp(t, r) == 0 })
		t.Logf("replica %d: link down %v after NATS stopped", i+1, took)
	}
	for i, r := range rs { // reports keep flowing to each replica
		from := reportsApplied(t, r, pool)
		servertest.Eventually(t, fmt.Sprintf("replica %d applying reports with NATS down", i+1),
			func() bool { return reportsApplied(t, r, pool) >= from+5 })
	}
	for i, r := range rs {
		got := picks(r, 30)
		if len(instances(r, pool)) != len(ids) {
			t.Errorf("replica %d lost instances while NATS is down: %v", i+1, instances(r, pool))
		}
		t.Logf("replica %d with NATS down: 30 picks, all answered: %v", i+1, got)
		_, err := r.Admin.SetWeights(c, &pb.SetWeightsRequest{AllowNewPool: true, Pool: pool, Weights: map[string]float64{"a": 7}})
		wantCode(t, err, codes.Unavailable, "nothing was changed")
		_, err = r.Admin.SetPolicy(c, &pb.SetPolicyRequest{AllowNewPool: true, Pool: pool, Policy: &pb.Policy{DeltaMs: f64(31)}})
		wantCode(t, err, codes.Unavailable, "nothing was changed")
		// The refused change left version 1 in force: checked once, now,
		// not polled (a poll would pass on its first look either way).
		if !weightsAt(r, 1, w1)() {
			t.Errorf("replica %d: weights are not version 1 %v after a refused SetWeights", i+1, w1)
		}
		if pr, err := r.Admin.GetPolicy(c, &pb.GetPolicyRequest{Pool: pool}); err != nil {
			t.Errorf("replica %d: GetPolicy with NATS down: %v", i+1, err)
		} else if pr.GetPolicy().GetDeltaMs() == 31 {
			t.Errorf("replica %d: a refused SetPolicy changed delta_ms to 31", i+1)
		}
	}

	// NATS comes back.
	ns.Restart()
	t.Logf("NATS down for %v", time.Since(stopped))
	for i, r := range rs {
		took := servertest.EventuallyWithin(t, 30*time.Second, "link up again", func() bool { return linkUp(t, r) == 1 })
		t.Logf("replica %d: link up %v after NATS restarted", i+1, took)
	}
	w2 := map[string]float64{"a": 2}
	took := servertest.EventuallyWithin(t, 30*time.Second, "a change accepted after the restart", func() bool {
		_, err := rs[0].Admin.SetWeights(c, &pb.SetWeightsRequest{AllowNewPool: true, Pool: pool, Weights: w2, ExpectedVersion: 1})
		if err != nil && status.Code(err) != codes.Unavailable {
			t.Fatalf("SetWeights after the restart: %v", err)
		}
		return err == nil
	})
	t.Logf("first change accepted %v after the links were up", took)
	for i, r := range rs {
		took := servertest.Eventually(t, "weights v2 on every replica", weightsAt(r, 2, w2))
		t.Logf("replica %d: v2 after %v", i+1, took)
	}
	busy.Store(true) // a-1, reporting to replica 1, is now swamped
	took = servertest.Eventually(t, "a-1's queue seen on replica 2", func() bool {
		in := instances(rs[1], pool)["a-1"]
		return in != nil && in.GetQueueMs() == 1e6
	})
	t.Logf("a report to replica 1 after the restart seen on replica 2 %v later", took)
	if got := picks(rs[1], 30); got["a-1"] != 0 {
		t.Errorf("replica 2 still routes to swamped a-1 of replica 1: %v", got)
	}

	// Replica 3 alone loses NATS; a change is made on replica 2 meanwhile.
	proxy.Cut()
	servertest.Eventually(t, "replica 3's link down", func() bool { return linkUp(t, rs[2]) == 0 })
	_, err := rs[2].Admin.SetWeights(c, &pb.SetWeightsRequest{AllowNewPool: true, Pool: pool, Weights: map[string]float64{"a": 9}})
	wantCode(t, err, codes.Unavailable, "nothing was changed")
	picks(rs[2], 10)
	w3 := map[string]float64{"a": 3}
	if _, err := rs[1].Admin.SetWeights(c, &pb.SetWeightsRequest{AllowNewPool: true, Pool: pool, Weights: w3, ExpectedVersion: 2}); err != nil {
		t.Fatal(err)
	}
	servertest.Eventually(t, "v3 on replica 1", weightsAt(rs[0], 3, w3))
	if weightsAt(rs[2], 2, w2)() != true {
		t.Fatalf("replica 3 changed while cut off")
	}
	proxy.Restore()
	restored := time.Now()
	took = servertest.EventuallyWithin(t, 30*time.Second, "v3 on replica 3 once it is back", weightsAt(rs[2], 3, w3))
	t.Logf("the change made while replica 3 was cut off reached it %v after its NATS came back", took)
	servertest.Eventually(t, "replica 3 linked again", func() bool { return linkUp(t, rs[2]) == 1 })
	if _, err := rs[2].Admin.SetWeights(c, &pb.SetWeightsRequest{AllowNewPool: true, Pool: pool, Weights: map[string]float64{"a": 4}, ExpectedVersion: 3}); err != nil {
		t.Fatalf("SetWeights on replica 3 after it is back: %v (%v after restore)", err, time.Since(restored))
	}
}

// TestReplicaUnconfirmedChange: a SetWeights whose write reaches the
// bucket but whose answer does not (NATS's replies to the replica are held
// by a proxy) answers Unavailable without claiming that nothing changed:
// the change was made (the other replica has it), and the replica shows it
// once NATS answers again.
func TestReplicaUnconfirmedChange(t *testing.T) {
	ns := natstest.Start(t)
	proxy := natstest.StartProxy(t, ns.Addr())
	r1 := servertest.Start(t, servertest.Replica(proxy.URL(), "r1"))
	r2 := servertest.Start(t, servertest.Replica(ns.URL(), "r2"))
	c := context.Background()
	if _, err := r1.Admin.SetWeights(c, &pb.SetWeightsRequest{AllowNewPool: true, Pool: "chat", Weights: map[string]float64{"a": 1}}); err != nil {
		t.Fatal(err)
	}
	proxy.FreezeAfter("PUB $KV.prefixroute.pool.chat")
	start := time.Now()
	_, err := r1.Admin.SetWeights(c, &pb.SetWeightsRequest{AllowNewPool: true, Pool: "chat", Weights: map[string]float64{"a": 2}, ExpectedVersion: 1})
	t.Logf("unconfirmed SetWeights answered after %v: %v", time.Since(start), err)
	wantCode(t, err, codes.Unavailable, "may or may not have been made")
	if strings.Contains(err.Error(), "nothing was changed") {
		t.Errorf("an unconfirmed change claims nothing was changed: %v", err)
	}
	servertest.Eventually(t, "the change made, on replica 2", func() bool {
		w, err := r2.Admin.GetWeights(c, &pb.GetWeightsRequest{Pool: "chat"})
		return err == nil && w.GetVersion() == 2 && w.GetWeights()["a"] == 2
	})
	proxy.Unfreeze()
	servertest.Eventually(t, "the change on replica 1 once NATS answers", func() bool {
		w, err := r1.Admin.GetWeights(c, &pb.GetWeightsRequest{Pool: "chat"})
		return err == nil && w.GetVersion() == 2 && w.GetWeights()["a"] == 2
	})
}
