package server_test

import (
	"math"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/internal/servertest"
)

// instanceByID returns the audit entry of one instance.
func instanceByID(t *testing.T, d *pb.Decision, id string) *pb.InstanceDecision {
	t.Helper()
	for _, in := range d.GetInstances() {
		if in.GetInstanceId() == id {
			return in
		}
	}
	t.Fatalf("instance %q not in the decision", id)
	return nil
}

func deploymentByName(t *testing.T, d *pb.Decision, name string) *pb.DeploymentDecision {
	t.Helper()
	for _, dep := range d.GetDeployments() {
		if dep.GetDeployment() == name {
			return dep
		}
	}
	t.Fatalf("deployment %q not in the decision", name)
	return nil
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-12 }

// TestSeedInstanceNumbers: queues of 100 and 120 ms at delta 20 give 2/3 and
// 1/3; 100 and 140 ms give 0.8 and 0.2 (the seed's numbers, through gRPC).
func TestSeedInstanceNumbers(t *testing.T) {
	for _, tc := range []struct {
		gap        float64
		pLow, pHig float64
	}{{20, 2.0 / 3, 1.0 / 3}, {40, 0.8, 0.2}} {
		e := servertest.Start(t)
		a, b := rep("m", "d", "a"), rep("m", "d", "b")
		a.QueueMs, b.QueueMs = f64(100), f64(100+tc.gap)
		report(e, a)
		report(e, b)
		resp, err := e.Pick.Pick(ctx(t), &pb.PickRequest{Pool: "m", Seed: u64(1)})
		if err != nil {
			t.Fatal(err)
		}
		dec := resp.GetDecision()
		ia, ib := instanceByID(t, dec, "a"), instanceByID(t, dec, "b")
		if !near(ia.GetProbability(), tc.pLow) || !near(ib.GetProbability(), tc.pHig) {
			t.Errorf("gap %v ms: P(a)=%v P(b)=%v, want %v and %v", tc.gap, ia.GetProbability(), ib.GetProbability(), tc.pLow, tc.pHig)
		}
		if ia.GetQueueMs() != 100 || ib.GetCostMs() != 100+tc.gap || dec.GetPolicy().GetDeltaMs() != 20 {
			t.Errorf("audit: a queue %v ms, b cost %v ms, delta %v", ia.GetQueueMs(), ib.GetCostMs(), dec.GetPolicy().GetDeltaMs())
		}
		e.Stop()
	}
}

// TestSeedDeploymentNumbers: weights 1:9, A holding the prefix through cache
// events, B cold, lambda_h 10: P_B = 9/1033. A cold prefix splits 1:9.
func TestSeedDeploymentNumbers(t *testing.T) {
	e := servertest.Start(t)
	hashes := []uint64{11, 12, 13, 14}
	a := rep("m", "A", "a1")
	a.ReportsCacheEvents, a.StoredBlockHashes = true, hashes
	b := rep("m", "B", "b1")
	b.ReportsCacheEvents = true
	report(e, a)
	report(e, b)
	if _, err := e.Admin.SetWeights(ctx(t), &pb.SetWeightsRequest{AllowNewPool: true, Pool: "m", Weights: map[string]float64{"A": 1, "B": 9}}); err != nil {
		t.Fatal(err)
	}
	resp, err := e.Pick.Pick(ctx(t), &pb.PickRequest{Pool: "m", PrefixHashes: hashes, PromptTokens: 64, Seed: u64(7)})
	if err != nil {
		t.Fatal(err)
	}
	dec := resp.GetDecision()
	dA, dB := deploymentByName(t, dec, "A"), deploymentByName(t, dec, "B")
	if !near(dB.GetProbability(), 9.0/1033) || !near(dA.GetProbability(), 1024.0/1033) {
		t.Errorf("P_A=%v P_B=%v, want 1024/1033 and 9/1033", dA.GetProbability(), dB.GetProbability())
	}
	if dA.GetHitRatio() != 1 || dB.GetHitRatio() != 0 || dA.GetMatchedBlocks() != 4 || dec.GetWeightsVersion() != 1 {
		t.Errorf("audit: H_A=%v H_B=%v matched_A=%d version=%d", dA.GetHitRatio(), dB.GetHitRatio(), dA.GetMatchedBlocks(), dec.GetWeightsVersion())
	}
	resp, err = e.Pick.Pick(ctx(t), &pb.PickRequest{Pool: "m", PrefixHashes: []uint64{99, 98}, PromptTokens: 32, Seed: u64(7)})
	if err != nil {
		t.Fatal(err)
	}
	dec = resp.GetDecision()
	if p := deploymentByName(t, dec, "B").GetProbability(); !near(p, 0.9) {
		t.Errorf("cold prefix: P_B=%v, want 0.9", p)
	}
	if got := instanceByID(t, dec, "b1").GetJointProbability(); !near(got, 0.9) {
		t.Errorf("joint P of b1 = %v, want 0.9", got)
	}
}

// TestDrainedDeploymentGetsNothing: weight 0 on A sends every pick to B, and
// all weights 0 fails with FailedPrecondition.
func TestDrainedDeploymentGetsNothing(t *testing.T) {
	e := servertest.Start(t)
	report(e, rep("m", "A", "a1"))
	report(e, rep("m", "B", "b1"))
	if _, err := e.Admin.SetWeights(ctx(t), &pb.SetWeightsRequest{AllowNewPool: true, Pool: "m", Weights: map[string]float64{"A": 0, "B": 1}}); err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		resp, err := e.Pick.Pick(ctx(t), &pb.PickRequest{Pool: "m", Seed: u64(uint64(i))})
		if err != nil {
			t.Fatal(err)
		}
		if resp.GetDeployment() != "B" {
			t.Fatalf("pick %d went to %s", i, resp.GetDeployment())
		}
		if r := deploymentByName(t, resp.GetDecision(), "A").GetExcludedReason(); r != "zero_weight" {
			t.Fatalf("A's reason %q, want zero_weight", r)
		}
	}
	if _, err := e.Admin.SetWeights(ctx(t), &pb.SetWeightsRequest{AllowNewPool: true, Pool: "m", Weights: map[string]float64{"B": 1}}); err != nil {
		t.Fatal(err)
	}
	resp, err := e.Pick.Pick(ctx(t), &pb.PickRequest{Pool: "m"})
	if err != nil {
		t.Fatal(err)
	}
	if r := deploymentByName(t, resp.GetDecision(), "A").GetExcludedReason(); r != "not_in_weights" {
		t.Errorf("A left out of the weights: reason %q, want not_in_weights", r)
	}
	if _, err := e.Admin.SetWeights(ctx(t), &pb.SetWeightsRequest{AllowNewPool: true, Pool: "m", Weights: map[string]float64{"A": 0, "B": 0}, AllowDrain: true}); err != nil {
		t.Fatalf("a full drain with allow_drain must be allowed: %v", err)
	}
	_, err = e.Pick.Pick(ctx(t), &pb.PickRequest{Pool: "m"})
	wantCode(t, err, codes.FailedPrecondition, `pool "m" is drained`, "weights version 3")
}

// TestStaleAndDisconnectedExcluded: an instance silent for stale_after is
// excluded as stale, one whose stream closed as disconnected; with none left
// Pick says Unavailable with the counts.
func TestStaleAndDisconnectedExcluded(t *testing.T) {
	e := servertest.Start(t)
	silent := report(e, rep("m", "d", "silent"))
	gone := report(e, rep("m", "d", "gone"))
	live := report(e, rep("m", "d", "live"))
	gone.close()
	e.Clock.Advance(2*time.Second + time.Millisecond)
	live.send(rep("m", "d", "live"))
	for i := range 20 {
		resp, err := e.Pick.Pick(ctx(t), &pb.PickRequest{Pool: "m", Seed: u64(uint64(i))})
		if err != nil {
			t.Fatal(err)
		}
		if resp.GetInstanceId() != "live" {
			t.Fatalf("picked %s", resp.GetInstanceId())
		}
		dec := resp.GetDecision()
		if r := instanceByID(t, dec, "silent").GetExcludedReason(); r != "stale" {
			t.Fatalf("silent: reason %q", r)
		}
		if r := instanceByID(t, dec, "gone").GetExcludedReason(); r != "disconnected" {
			t.Fatalf("gone: reason %q", r)
		}
	}
	live.close()
	_, err := e.Pick.Pick(ctx(t), &pb.PickRequest{Pool: "m"})
	wantCode(t, err, codes.Unavailable, "no eligible instance", "2 disconnected", "1 stale")

	// After forget_after (30 s) the disconnected instances are forgotten, and
	// so is the silent one, whose stream is ended.
	e.Clock.Advance(31 * time.Second)
	e.D.Server().Registry().Sweep(e.Clock.Now())
	_, err = e.Admin.ListInstances(ctx(t), &pb.ListInstancesRequest{Pool: "m"})
	if err != nil {
		t.Fatal(err)
	}
	if list, _ := e.Admin.ListInstances(ctx(t), &pb.ListInstancesRequest{Pool: "m"}); len(list.GetInstances()) != 0 {
		t.Errorf("after forget_after: %v", list.GetInstances())
	}
	wantCode(t, silent.trySend(rep("m", "d", "silent")), codes.Aborted, "forgotten")
}

// TestSeedReproducesChoice: the same state and seed give the same choice and
// the same draws; the seed the router drew is reported and replays too.
func TestSeedReproducesChoice(t *testing.T) {
	e := servertest.Start(t)
	for _, id := range []string{"a", "b", "c", "d"} {
		report(e, rep("m", "x", id))
	}
	// Equal instances and a cold prefix: choices depend only on the draw.
	// Optimistic accounting changes costs after each pick, so reset it with
	// fresh reports between picks.
	refresh := func() {
		for _, id := range []string{"a", "b", "c", "d"} {
			report(e, rep("m", "x", id))
		}
	}
	first, err := e.Pick.Pick(ctx(t), &pb.PickRequest{Pool: "m", PromptTokens: 100})
	if err != nil {
		t.Fatal(err)
	}
	refresh()
	seed := first.GetDecision().GetSeed()
	again, err := e.Pick.Pick(ctx(t), &pb.PickRequest{Pool: "m", PromptTokens: 100, Seed: &seed})
	if err != nil {
		t.Fatal(err)
	}
	if again.GetInstanceId() != first.GetInstanceId() || again.GetDecision().GetInstanceDraw() != first.GetDecision().GetInstanceDraw() {
		t.Errorf("seed %d: %s (draw %v) then %s (draw %v)", seed, first.GetInstanceId(), first.GetDecision().GetInstanceDraw(),
			again.GetInstanceId(), again.GetDecision().GetInstanceDraw())
	}
}

// TestOptimisticAccountingSpreads: 200 picks between two reports, every
// instance equal at the start, do not all land on one instance.
func TestOptimisticAccountingSpreads(t *testing.T) {
	e := servertest.Start(t)
	ids := []string{"a", "b", "c", "d"}
	for _, id := range ids {
		report(e, rep("m", "x", id))
	}
	count := map[string]int{}
	for i := range 200 {
		resp, err := e.Pick.Pick(ctx(t), &pb.PickRequest{Pool: "m", PromptTokens: 2000, PrefixHashes: []uint64{uint64(1000 + i)}, Seed: u64(uint64(i))})
		if err != nil {
			t.Fatal(err)
		}
		count[resp.GetInstanceId()]++
	}
	for _, id := range ids {
		// 2000 uncached tokens at 10000 tok/s is 200 ms of queue per pick, ten
		// times delta: an instance ahead by one pick is 1024x less likely.
		if count[id] < 40 {
			t.Errorf("instance %s got %d of 200 picks: %v", id, count[id], count)
		}
	}
}

// TestAuditLevels: the levels trim the response, never the choice.
func TestAuditLevels(t *testing.T) {
	e := servertest.Start(t)
	for _, id := range []string{"a", "b", "c"} {
		report(e, rep("m", "x", id))
	}
	for _, tc := range []struct {
		level     pb.AuditLevel
		decision  bool
		instances int
	}{
		{pb.AuditLevel_AUDIT_LEVEL_UNSPECIFIED, true, 3},
		{pb.AuditLevel_AUDIT_LEVEL_FULL, true, 3},
		{pb.AuditLevel_AUDIT_LEVEL_CHOSEN, true, 1},
		{pb.AuditLevel_AUDIT_LEVEL_NONE, false, 0},
	} {
		resp, err := e.Pick.Pick(ctx(t), &pb.PickRequest{Pool: "m", Seed: u64(3), Audit: tc.level})
		if err != nil {
			t.Fatal(err)
		}
		if (resp.GetDecision() != nil) != tc.decision || len(resp.GetDecision().GetInstances()) != tc.instances {
			t.Errorf("%v: decision %v with %d instances", tc.level, resp.GetDecision() != nil, len(resp.GetDecision().GetInstances()))
		}
		if tc.level == pb.AuditLevel_AUDIT_LEVEL_CHOSEN && resp.GetDecision().GetInstances()[0].GetInstanceId() != resp.GetInstanceId() {
			t.Errorf("chosen audit names %s, pick chose %s", resp.GetDecision().GetInstances()[0].GetInstanceId(), resp.GetInstanceId())
		}
		if resp.GetInstanceId() == "" || resp.GetAddress() == "" {
			t.Errorf("%v: no choice in %v", tc.level, resp)
		}
	}
}
