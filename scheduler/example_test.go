package scheduler_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/prefixroute/prefixroute/scheduler"
)

// The seed's cutover: deployment A (weight 1) holds the request's prefix,
// the new deployment B (weight 9) is cold. With lambda_h = 10,
// P(B) = 9/(2^10+9) ≈ 0.87%. Inside each deployment the softmax with
// delta 20 ms turns a 20 ms gap into 2/3 : 1/3 and a 40 ms gap into
// 0.8 : 0.2.
func ExampleDecide() {
	policy := scheduler.DefaultPolicy() // softmax, delta_ms 20, lambda_h 10
	policy.DoublingContextTokens = 0    // the seed's linear prefill: cached tokens free
	snap := scheduler.Snapshot{
		Deployments: []scheduler.Deployment{{Name: "A", Weight: 1}, {Name: "B", Weight: 9}},
		Instances: []scheduler.Instance{
			// 1000 tokens/s: the 64-token prompt costs 64 ms where it is not cached.
			{ID: "a-0", Deployment: 0, MatchedBlocks: 4, PrefillTokensPerSecond: 1000, HasQueueMs: true, QueueMs: 100},
			{ID: "a-1", Deployment: 0, MatchedBlocks: 0, PrefillTokensPerSecond: 1000, HasQueueMs: true, QueueMs: 56},
			{ID: "b-0", Deployment: 1, PrefillTokensPerSecond: 1000, HasQueueMs: true, QueueMs: 16},
			{ID: "b-1", Deployment: 1, PrefillTokensPerSecond: 1000, HasQueueMs: true, QueueMs: 56},
			{ID: "b-2", Deployment: 1, PrefillTokensPerSecond: 1000, ReportAge: time.Minute},
		},
	}
	req := scheduler.Request{PromptTokens: 64, Blocks: 4} // 4 blocks of 16 tokens
	rng := rand.New(rand.NewPCG(1, 2))

	var d scheduler.Decision // reuse it across calls: no allocation
	if err := scheduler.Decide(&policy, req, &snap, rng, &d); err != nil {
		fmt.Println("error:", err)
		return
	}
	fmt.Printf("9/1033 = %.6f\n", 9.0/1033)
	for k, dr := range d.Deployments {
		fmt.Printf("deployment %s: weight %g, hit ratio %.2f, P(d) = %.6f\n",
			snap.Deployments[k].Name, dr.Weight, dr.HitRatio, dr.Probability)
	}
	for i, r := range d.Instances {
		fmt.Printf("instance %s: cost %3g ms = prefill %2g + queue %3g, P(i|d) = %.4f, joint = %.6f",
			snap.Instances[i].ID, r.CostMs, r.PrefillMs, r.QueueMs, r.Probability, r.Joint)
		if r.Reason != scheduler.ReasonNone {
			fmt.Printf(", excluded: %s", r.Reason)
		}
		fmt.Println()
	}
	fmt.Printf("chose %s (draws %.4f, %.4f); add %d tokens to its queue\n",
		snap.Instances[d.Instance].ID, d.DeploymentDraw, d.InstanceDraw, d.Instances[d.Instance].UncachedTokens)
	// Output:
	// 9/1033 = 0.008712
	// deployment A: weight 1, hit ratio 1.00, P(d) = 0.991288
	// deployment B: weight 9, hit ratio 0.00, P(d) = 0.008712
	// instance a-0: cost 100 ms = prefill  0 + queue 100, P(i|d) = 0.6667, joint = 0.660858
	// instance a-1: cost 120 ms = prefill 64 + queue  56, P(i|d) = 0.3333, joint = 0.330429
	// instance b-0: cost  80 ms = prefill 64 + queue  16, P(i|d) = 0.8000, joint = 0.006970
	// instance b-1: cost 120 ms = prefill 64 + queue  56, P(i|d) = 0.2000, joint = 0.001742
	// instance b-2: cost  64 ms = prefill 64 + queue   0, P(i|d) = 0.0000, joint = 0.000000, excluded: stale
	// chose a-0 (draws 0.6765, 0.4614); add 0 tokens to its queue
}

// When nothing is eligible, the Excluded counts say why.
func ExampleDecision_ExcludedSummary() {
	policy := scheduler.DefaultPolicy()
	snap := scheduler.Snapshot{
		Deployments: []scheduler.Deployment{{Name: "A", Weight: 1}},
		Instances: []scheduler.Instance{
			{ID: "a-0", ReportAge: time.Minute},
			{ID: "a-1", ReportAge: time.Minute},
			{ID: "a-2", ReportAge: time.Minute},
			{ID: "a-3", Draining: true},
		},
	}
	var d scheduler.Decision
	err := scheduler.Decide(&policy, scheduler.Request{}, &snap, rand.New(rand.NewPCG(1, 2)), &d)
	if errors.Is(err, scheduler.ErrNoEligibleInstance) {
		fmt.Printf("%v (%s)\n", err, d.ExcludedSummary())
	}
	// Output:
	// scheduler: no eligible instance (3 stale, 1 draining)
}
