package scheduler_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/prefixroute/prefixroute/scheduler"
)

// TestChosenOnlyMatchesFull compares a ChosenOnly decision with the full one
// on 600 random pools (seeded), field by field: the choice, the draws, the
// error, every deployment result, Excluded outside the strategy reasons,
// every instance's cost parts and eligibility reason, and the complete
// result of every instance of the chosen deployment. The other deployments'
// instances must have Probability and Joint 0.
func TestChosenOnlyMatchesFull(t *testing.T) {
	strategies := []scheduler.Strategy{scheduler.Softmax, scheduler.Threshold, scheduler.Argmin}
	for seed := range uint64(600) {
		rng := rand.New(rand.NewPCG(seed, 17))
		n, nd, blocks := 1+rng.IntN(200), 1+rng.IntN(16), rng.IntN(64)
		snap := randomPool(rng, n, nd, blocks)
		p := policy(func(p *scheduler.Policy) {
			p.Strategy = strategies[seed%3]
			if seed%2 == 1 {
				p.DeploymentDeltaMs = 50
			}
			if seed%5 == 0 {
				p.MaxQueueMs = 250
			}
			if seed%3 == 2 { // a short lane that refuses about half the prefills
				p.ShortLanes, p.ShortLaneMaxPrefillMs = uint32(1+seed%4), 20
			}
		})
		req := scheduler.Request{PromptTokens: uint32(blocks*16 + rng.IntN(16)), Blocks: blocks}
		var full, chosen scheduler.Decision
		errFull := scheduler.Decide(p, req, snap, rand.New(rand.NewPCG(seed, 1)), &full)
		req.ChosenOnly = true
		errChosen := scheduler.Decide(p, req, snap, rand.New(rand.NewPCG(seed, 1)), &chosen)
		name := fmt.Sprintf("seed %d (%d instances, %d deployments, %v)", seed, n, nd, p.Strategy)
		if !errors.Is(errChosen, errFull) && errChosen != errFull {
			t.Fatalf("%s: error %v, full %v", name, errChosen, errFull)
		}
		compareChosen(t, name, snap, &full, &chosen)
	}
}

func compareChosen(t *testing.T, name string, snap *scheduler.Snapshot, full, chosen *scheduler.Decision) {
	t.Helper()
	if full.Deployment != chosen.Deployment || full.Instance != chosen.Instance ||
		full.DeploymentDraw != chosen.DeploymentDraw || full.InstanceDraw != chosen.InstanceDraw ||
		full.Saturated != chosen.Saturated || full.DrainMs != chosen.DrainMs {
		t.Fatalf("%s: chosen-only picked (%d, %d, draws %v %v, saturated %v, drain %v), full (%d, %d, draws %v %v, saturated %v, drain %v)",
			name, chosen.Deployment, chosen.Instance, chosen.DeploymentDraw, chosen.InstanceDraw, chosen.Saturated, chosen.DrainMs,
			full.Deployment, full.Instance, full.DeploymentDraw, full.InstanceDraw, full.Saturated, full.DrainMs)
	}
	for k := range full.Deployments {
		if full.Deployments[k] != chosen.Deployments[k] {
			t.Fatalf("%s: deployment %d: chosen-only %+v, full %+v", name, k, chosen.Deployments[k], full.Deployments[k])
		}
	}
	for r := range full.Excluded {
		reason := scheduler.Reason(r)
		if !strategyReason(reason) && full.Excluded[r] != chosen.Excluded[r] {
			t.Fatalf("%s: Excluded[%v] = %d, full %d", name, reason, chosen.Excluded[r], full.Excluded[r])
		}
	}
	for i := range full.Instances {
		f, c := full.Instances[i], chosen.Instances[i]
		if full.Instance < 0 || snap.Instances[i].Deployment == full.Deployment {
			// On error both are full audits.
			if f != c {
				t.Fatalf("%s: instance %d of the chosen deployment: chosen-only %+v, full %+v", name, i, c, f)
			}
			continue
		}
		if c.Probability != 0 || c.Joint != 0 {
			t.Fatalf("%s: instance %d outside the chosen deployment has probability %v, joint %v", name, i, c.Probability, c.Joint)
		}
		if strategyReason(f.Reason) {
			f.Reason = scheduler.ReasonNone
		}
		f.Probability, f.Joint = 0, 0
		if f != c {
			t.Fatalf("%s: instance %d: chosen-only %+v, full %+v", name, i, c, f)
		}
	}
}

// strategyReason reports whether r is set by the instance level, which a
// ChosenOnly decision runs for the drawn deployment only.
func strategyReason(r scheduler.Reason) bool {
	return r == scheduler.ReasonThreshold || r == scheduler.ReasonNotMinimum || r == scheduler.ReasonShortLane
}

// TestChosenOnlyDoesNotAllocate: a reused Decision makes a ChosenOnly
// Decide allocation-free too.
func TestChosenOnlyDoesNotAllocate(t *testing.T) {
	snap := benchSnapshot(1000, 16, 1)
	p := policy(nil)
	req := scheduler.Request{PromptTokens: 2048, Blocks: 128, ChosenOnly: true}
	rng := rand.New(rand.NewPCG(1, 2))
	var d scheduler.Decision
	if err := scheduler.Decide(p, req, snap, rng, &d); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() {
		if err := scheduler.Decide(p, req, snap, rng, &d); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Fatalf("ChosenOnly Decide allocates %v times per call", n)
	}
}
