package server_test

import (
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/durationpb"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/internal/protoconv"
	"github.com/prefixroute/prefixroute/internal/servertest"
	"github.com/prefixroute/prefixroute/internal/testwait"
)

// TestPickHeldDeployment: under on_saturation: queue, a full deployment
// keeps its weight. The stable deployment (weight 19) is full and the
// canary (weight 1) has room: a pick whose draw (its seed) lands on stable
// waits for stable, even while the canary could take it, and leaves when
// stable reports headroom; a pick that draws the canary goes there at once.
// Under least_loaded the same picks all spill onto the canary.
func TestPickHeldDeployment(t *testing.T) {
	e := servertest.Start(t)
	if _, err := e.Admin.SetWeights(ctx(t), &pb.SetWeightsRequest{AllowNewPool: true, Pool: "m",
		Weights: map[string]float64{"stable": 19, "canary": 1}}); err != nil {
		t.Fatal(err)
	}
	setPolicy := func(p *pb.Policy) {
		t.Helper()
		if _, err := e.Admin.SetPolicy(ctx(t), &pb.SetPolicyRequest{Pool: "m", Policy: p}); err != nil {
			t.Fatal(err)
		}
	}
	full := rep("m", "stable", "s1")
	full.KvCacheUsage = 0.99
	stable := report(e, full)
	report(e, rep("m", "canary", "c1"))

	// least_loaded (the default): every pick spills onto the canary. The
	// audit gives each seed's deployment draw u, which decides where it
	// goes under queue: the canary when u falls in its 1/20 of the
	// cumulative shares (in the audit's deployment order).
	const seeds = 60
	drawsCanary := make(map[uint64]bool)
	for seed := uint64(1); seed <= seeds; seed++ {
		resp, err := e.Pick.Pick(ctx(t), &pb.PickRequest{Pool: "m", PromptTokens: 10, Seed: &seed})
		if err != nil {
			t.Fatal(err)
		}
		if resp.GetDeployment() != "canary" {
			t.Fatalf("least_loaded, seed %d: %q, want canary (stable is full)", seed, resp.GetDeployment())
		}
		d := resp.GetDecision()
		u, first := d.GetDeploymentDraw(), d.GetDeployments()[0].GetDeployment()
		drawsCanary[seed] = (first == "canary" && u < 0.05) || (first == "stable" && u >= 0.95)
	}
	var canarySeed uint64
	for seed := uint64(1); seed <= seeds && canarySeed == 0; seed++ {
		if drawsCanary[seed] {
			canarySeed = seed
		}
	}
	if canarySeed == 0 || len(drawsCanary) != seeds {
		t.Fatalf("no seed of %d draws the canary; the test covers too little", seeds)
	}
	// stableHeld: a pick that draws the canary sees stable full (held).
	stableHeld := func() bool {
		resp, err := e.Pick.Pick(ctx(t), &pb.PickRequest{Pool: "m", PromptTokens: 10, Seed: &canarySeed})
		if err != nil {
			t.Fatal(err)
		}
		for _, dd := range resp.GetDecision().GetDeployments() {
			if dd.GetDeployment() == "stable" {
				return dd.GetHeld()
			}
		}
		return false
	}

	setPolicy(&pb.Policy{OnSaturation: pb.OnSaturation_ON_SATURATION_QUEUE, QueueTtl: durationpb.New(time.Minute)})
	testwait.Eventually(t, "stable held under queue", stableHeld)
	toCanary, toStable := 0, 0
	for seed := uint64(1); seed <= seeds; seed++ {
		held := make(chan pickResult, 1)
		go func() {
			resp, err := e.Pick.Pick(ctx(t), &pb.PickRequest{Pool: "m", PromptTokens: 10, Seed: &seed})
			held <- pickResult{resp, err}
		}()
		testwait.Eventually(t, "the pick answers or waits", func() bool { return len(held) > 0 || waiting(e, "m") == 1 })
		if !drawsCanary[seed] {
			toStable++
			if len(held) > 0 {
				res := <-held
				t.Fatalf("seed %d draws stable (full) but did not wait: %v, %v", seed, res.resp.GetDeployment(), res.err)
			}
			free := rep("m", "stable", "s1")
			free.KvCacheUsage = 0.1
			stable.send(free)
			res := <-held
			if res.err != nil {
				t.Fatalf("seed %d: the held pick: %v", seed, res.err)
			}
			if res.resp.GetDeployment() != "stable" || res.resp.GetDecision().GetQueueWaitMs() <= 0 {
				t.Fatalf("seed %d: released to %q after %v ms; want stable after > 0 ms", seed, res.resp.GetDeployment(), res.resp.GetDecision().GetQueueWaitMs())
			}
			stable.send(full)
			testwait.Eventually(t, "stable full again", stableHeld)
			continue
		}
		toCanary++
		res := <-held
		if res.err != nil || res.resp.GetDeployment() != "canary" || res.resp.GetDecision().GetQueueWaitMs() != 0 {
			t.Fatalf("seed %d draws the canary: %q after %v ms, %v; want canary at once", seed, res.resp.GetDeployment(), res.resp.GetDecision().GetQueueWaitMs(), res.err)
		}
		var sd *pb.DeploymentDecision
		for _, dd := range res.resp.GetDecision().GetDeployments() {
			if dd.GetDeployment() == "stable" {
				sd = dd
			}
		}
		if !sd.GetHeld() || sd.GetFullInstances() != 1 || sd.GetEligibleInstances() != 0 || sd.GetProbability() != 0.95 {
			t.Fatalf("seed %d: stable's audit %v; want held, 1 full, 0 eligible, P 0.95", seed, sd)
		}
	}
	t.Logf("under queue: %d of %d picks to the canary at once, %d waited for stable", toCanary, seeds, toStable)

	// A pick that draws stable waits until its deadline while stable stays
	// full: QUEUE_TIMEOUT, not a spill onto the canary.
	setPolicy(&pb.Policy{QueueTtl: durationpb.New(30 * time.Millisecond)})
	var stableSeed uint64
	for seed := uint64(1); seed <= seeds && stableSeed == 0; seed++ {
		if !drawsCanary[seed] {
			stableSeed = seed
		}
	}
	_, err := e.Pick.Pick(ctx(t), &pb.PickRequest{Pool: "m", PromptTokens: 10, Seed: &stableSeed})
	wantCode(t, err, codes.ResourceExhausted, "queue_timeout")
	if got := protoconv.ReasonOf(err); got != "QUEUE_TIMEOUT" {
		t.Errorf("reason %q, want QUEUE_TIMEOUT", got)
	}
}
