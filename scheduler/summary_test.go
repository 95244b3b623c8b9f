package scheduler_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/prefixroute/prefixroute/scheduler"
)

// summarise computes what a caller keeping per-deployment figures would
// hold for snap: the summaries and the eligibility reasons' counts, from
// Standing, ReasonAt and SoftMinLoadMs. ok is false when an instance needs
// Decide.
func summarise(p *scheduler.Policy, snap *scheduler.Snapshot) (sums []scheduler.Summary, excluded [scheduler.NumReasons]int, ok bool) {
	sums = make([]scheduler.Summary, len(snap.Deployments))
	loads := make([][]float64, len(snap.Deployments))
	for i := range snap.Instances {
		in := &snap.Instances[i]
		standing, load, good := scheduler.Standing(p, in)
		if !good {
			return nil, excluded, false
		}
		r := scheduler.ReasonAt(standing, in.ReportAge > p.StaleAfter, in.Excluded)
		if r != scheduler.ReasonNone {
			excluded[r]++
			if r == scheduler.ReasonKVFull || r == scheduler.ReasonQueueFull {
				sums[in.Deployment].Full++
			}
			continue
		}
		s := &sums[in.Deployment]
		s.Eligible++
		s.MatchedBlocks = max(s.MatchedBlocks, in.MatchedBlocks)
		loads[in.Deployment] = append(loads[in.Deployment], load)
	}
	if p.DeploymentDeltaMs > 0 {
		for k := range sums {
			sums[k].LoadMs = scheduler.SoftMinLoadMs(p, loads[k])
		}
	}
	return sums, excluded, true
}

// TestSummaryMatchesFull compares DecideDeployment + DecideInstance (on the
// drawn deployment's instances only) with the full Decide on 800 random
// pools (seeded) with every eligibility reason, each strategy, the load term
// on and off: the choice, both draws, every deployment result, Excluded
// outside the strategy reasons, and the complete result of every instance
// of the chosen deployment. When DecideDeployment fails, Decide must fail
// too or pick a saturated instance (the caller then runs Decide).
func TestSummaryMatchesFull(t *testing.T) {
	strategies := []scheduler.Strategy{scheduler.Softmax, scheduler.Threshold, scheduler.Argmin}
	fast, held := 0, 0
	for seed := range uint64(800) {
		rng := rand.New(rand.NewPCG(seed, 23))
		n, nd, blocks := 1+rng.IntN(200), 1+rng.IntN(16), rng.IntN(64)
		snap := randomPool(rng, n, nd, blocks)
		for i := range snap.Instances {
			in := &snap.Instances[i]
			in.ReportAge = time.Duration(rng.IntN(3000)) * time.Millisecond
			in.Disconnected = rng.IntN(20) == 0
			in.Excluded = rng.IntN(15) == 0
			if rng.IntN(3) == 0 {
				in.HasQueueMs, in.QueuedPrefillTokens = false, uint64(rng.IntN(100000))
			}
			if rng.IntN(3) == 0 {
				in.PrefillTokensPerSecond = 0 // the policy's default
			}
		}
		p := policy(func(p *scheduler.Policy) {
			p.Strategy = strategies[seed%3]
			if seed%2 == 1 {
				p.DeploymentDeltaMs = 1 + float64(seed%7)*20
			}
			if seed%5 == 0 {
				p.MaxQueueMs = 250
			}
			switch {
			case seed%11 == 0:
				p.OnSaturation = scheduler.SaturationShed
			case seed%5 == 2:
				p.OnSaturation = scheduler.SaturationQueue
			}
		})
		req := scheduler.Request{PromptTokens: uint32(blocks*16 + rng.IntN(16)), Blocks: blocks}
		name := fmt.Sprintf("seed %d (%d instances, %d deployments, %v)", seed, n, nd, p.Strategy)
		var full scheduler.Decision
		errFull := scheduler.Decide(p, req, snap, rand.New(rand.NewPCG(seed, 1)), &full)

		sums, excluded, ok := summarise(p, snap)
		if !ok {
			t.Fatalf("%s: Standing rejected a valid instance", name)
		}
		var d scheduler.Decision
		rngS := rand.New(rand.NewPCG(seed, 1))
		err := scheduler.DecideDeployment(p, req, snap.Deployments, sums, &excluded, rngS, &d)
		if err != nil {
			if !errors.Is(err, scheduler.ErrNoEligibleInstance) && !errors.Is(err, scheduler.ErrAllWeightsZero) &&
				!errors.Is(err, scheduler.ErrDeploymentSaturated) {
				t.Fatalf("%s: DecideDeployment: %v", name, err)
			}
			if errors.Is(err, scheduler.ErrDeploymentSaturated) {
				held++
				if d.DeploymentDraw != 0 {
					t.Fatalf("%s: DecideDeployment drew before ErrDeploymentSaturated", name)
				}
				if !slices.ContainsFunc(full.Deployments, func(r scheduler.DeploymentResult) bool { return r.Held }) {
					t.Fatalf("%s: DecideDeployment: %v; Decide held no deployment", name, err)
				}
				continue
			}
			if errFull == nil && !full.Saturated {
				t.Fatalf("%s: DecideDeployment: %v; Decide picked %d", name, err, full.Instance)
			}
			continue
		}
		if errFull != nil || full.Saturated {
			t.Fatalf("%s: DecideDeployment succeeded; Decide: %v (saturated %v)", name, errFull, full.Saturated)
		}
		// The drawn deployment's instances, in snapshot order.
		var idx []int
		sub := scheduler.Snapshot{Deployments: snap.Deployments}
		for i := range snap.Instances {
			if snap.Instances[i].Deployment == d.Deployment {
				idx = append(idx, i)
				sub.Instances = append(sub.Instances, snap.Instances[i])
			}
		}
		if err := scheduler.DecideInstance(p, req, &sub, rngS, &d); err != nil {
			t.Fatalf("%s: DecideInstance: %v", name, err)
		}
		fast++
		if full.Deployment != d.Deployment || full.Instance != idx[d.Instance] ||
			full.DeploymentDraw != d.DeploymentDraw || full.InstanceDraw != d.InstanceDraw || d.Saturated || d.DrainMs != 0 {
			t.Fatalf("%s: summary picked (%d, %d, draws %v %v), full (%d, %d, draws %v %v)", name,
				d.Deployment, idx[d.Instance], d.DeploymentDraw, d.InstanceDraw,
				full.Deployment, full.Instance, full.DeploymentDraw, full.InstanceDraw)
		}
		for k := range full.Deployments {
			if full.Deployments[k] != d.Deployments[k] {
				t.Fatalf("%s: deployment %d: summary %+v, full %+v", name, k, d.Deployments[k], full.Deployments[k])
			}
		}
		var strategy [scheduler.NumReasons]int // the chosen deployment's strategy reasons in full
		for j, i := range idx {
			if full.Instances[i] != d.Instances[j] {
				t.Fatalf("%s: instance %d: summary %+v, full %+v", name, i, d.Instances[j], full.Instances[i])
			}
			strategy[full.Instances[i].Reason]++
		}
		for r := range full.Excluded {
			want := full.Excluded[r]
			if reason := scheduler.Reason(r); reason == scheduler.ReasonThreshold || reason == scheduler.ReasonNotMinimum {
				want = strategy[r]
			}
			if d.Excluded[r] != want {
				t.Fatalf("%s: Excluded[%v] = %d, want %d", name, scheduler.Reason(r), d.Excluded[r], want)
			}
		}
	}
	if fast < 400 {
		t.Fatalf("only %d of 800 pools decided from summaries; the test covers too little", fast)
	}
	if held == 0 {
		t.Fatal("no pool had a Held deployment; the test covers too little")
	}
}

// TestStandingRejects: figures Decide rejects, or a cost that can overflow,
// make Standing say the instance needs Decide.
func TestStandingRejects(t *testing.T) {
	p := policy(nil)
	for name, in := range map[string]scheduler.Instance{
		"negative queue": {QueueMs: -1, HasQueueMs: true},
		"tiny tps":       {PrefillTokensPerSecond: 1e-300},
		"NaN kv":         {KVUsage: math.NaN()},
	} {
		if _, _, ok := scheduler.Standing(p, &in); ok {
			t.Errorf("%s: Standing ok", name)
		}
	}
	if r, load, ok := scheduler.Standing(p, &scheduler.Instance{QueueMs: 5, HasQueueMs: true}); !ok || r != scheduler.ReasonNone || load != 5+p.BatchWaitMs {
		t.Errorf("Standing = %v, %v, %v; want none, %v, true", r, load, ok, 5+p.BatchWaitMs)
	}
}

// TestDecideDeploymentErrors: bad arguments, and the pools the summaries
// cannot decide, without a draw.
func TestDecideDeploymentErrors(t *testing.T) {
	p := policy(nil)
	deps := []scheduler.Deployment{{Name: "a", Weight: 1}, {Name: "b"}}
	var ex [scheduler.NumReasons]int
	var d scheduler.Decision
	for _, tc := range []struct {
		name string
		sums []scheduler.Summary
		want error
	}{
		{"short", []scheduler.Summary{{Eligible: 1}}, scheduler.ErrInvalidArgument},
		{"none eligible", []scheduler.Summary{{}, {}}, scheduler.ErrNoEligibleInstance},
		{"weight 0 only", []scheduler.Summary{{}, {Eligible: 2}}, scheduler.ErrAllWeightsZero},
	} {
		rng := draws()
		if err := scheduler.DecideDeployment(p, scheduler.Request{}, deps, tc.sums, &ex, rng, &d); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
		if d.Deployment != -1 || d.Instance != -1 {
			t.Errorf("%s: picked (%d, %d)", tc.name, d.Deployment, d.Instance)
		}
	}
	if err := scheduler.DecideInstance(p, scheduler.Request{}, &scheduler.Snapshot{Deployments: deps}, draws(), &d); !errors.Is(err, scheduler.ErrInvalidArgument) {
		t.Errorf("DecideInstance with no deployment drawn: %v", err)
	}
	// A summary that disagrees with the instances.
	sums := []scheduler.Summary{{Eligible: 2}, {}}
	if err := scheduler.DecideDeployment(p, scheduler.Request{}, deps, sums, &ex, draws(0.5), &d); err != nil {
		t.Fatal(err)
	}
	snap := scheduler.Snapshot{Deployments: deps, Instances: []scheduler.Instance{{ID: "x"}}}
	if err := scheduler.DecideInstance(p, scheduler.Request{}, &snap, draws(0.5), &d); !errors.Is(err, scheduler.ErrInvalidSnapshot) || d.Instance != -1 {
		t.Errorf("DecideInstance with 1 of 2 eligible: %v, instance %d", err, d.Instance)
	}
}

// TestSummaryDoesNotAllocate: with a reused Decision both halves are
// allocation-free.
func TestSummaryDoesNotAllocate(t *testing.T) {
	snap := benchSnapshot(64, 4, 1)
	p := policy(nil)
	req := scheduler.Request{PromptTokens: 2048, Blocks: 128}
	sums, ex, _ := summarise(p, snap)
	var sub scheduler.Snapshot
	rng := rand.New(rand.NewPCG(1, 2))
	var d scheduler.Decision
	run := func() {
		if err := scheduler.DecideDeployment(p, req, snap.Deployments, sums, &ex, rng, &d); err != nil {
			t.Fatal(err)
		}
		sub.Deployments, sub.Instances = snap.Deployments, sub.Instances[:0]
		for _, in := range snap.Instances {
			if in.Deployment == d.Deployment {
				sub.Instances = append(sub.Instances, in)
			}
		}
		if err := scheduler.DecideInstance(p, req, &sub, rng, &d); err != nil {
			t.Fatal(err)
		}
	}
	for range 8 {
		run()
	}
	if n := testing.AllocsPerRun(100, run); n != 0 {
		t.Fatalf("DecideDeployment + DecideInstance allocate %v times per call", n)
	}
}
