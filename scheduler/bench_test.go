package scheduler_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/prefixroute/prefixroute/scheduler"
)

// benchSnapshot returns a pool of n instances spread round-robin over nd
// deployments with weights 1..nd, realistic load figures drawn from a PCG
// seeded with seed: a request of 128 blocks matched 0..128 blocks deep,
// queues of 0..200 ms (half reported in ms, half in tokens), some assigned
// work, and about 1 in 16 instances failing an eligibility check.
func benchSnapshot(n, nd int, seed uint64) *scheduler.Snapshot {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	snap := &scheduler.Snapshot{Deployments: make([]scheduler.Deployment, nd), Instances: make([]scheduler.Instance, n)}
	for k := range snap.Deployments {
		snap.Deployments[k] = scheduler.Deployment{Name: fmt.Sprintf("dep-%d", k), Weight: float64(k + 1)}
	}
	for i := range snap.Instances {
		in := scheduler.Instance{
			ID:                     fmt.Sprintf("inst-%d", i),
			Deployment:             i % nd,
			MatchedBlocks:          rng.IntN(129),
			PrefillTokensPerSecond: 5000 + 10000*rng.Float64(),
			AssignedTokens:         uint64(rng.IntN(2048)),
			KVUsage:                0.9 * rng.Float64(),
			ReportAge:              time.Duration(rng.IntN(100)) * time.Millisecond,
		}
		if i%2 == 0 {
			in.HasQueueMs, in.QueueMs = true, 200*rng.Float64()
		} else {
			in.QueuedPrefillTokens = uint64(rng.IntN(4000))
		}
		if i%16 == 5 {
			in.ReportAge = time.Minute
		}
		snap.Instances[i] = in
	}
	return snap
}

func BenchmarkDecide(b *testing.B) {
	type variant struct {
		name string
		set  func(*scheduler.Policy)
	}
	defaults := variant{"softmax", nil}
	grid := []struct {
		n, nd    int
		variants []variant
	}{
		{8, 2, []variant{defaults}},
		{8, 16, []variant{defaults}},
		{64, 2, []variant{defaults}},
		{64, 16, []variant{defaults}},
		{1000, 2, []variant{defaults}},
		{1000, 16, []variant{
			defaults,
			{"threshold", func(p *scheduler.Policy) { p.Strategy = scheduler.Threshold }},
			{"argmin", func(p *scheduler.Policy) { p.Strategy = scheduler.Argmin }},
			{"softmax+load", func(p *scheduler.Policy) { p.DeploymentDeltaMs = 50 }},
		}},
	}
	for _, g := range grid {
		for _, v := range g.variants {
			b.Run(fmt.Sprintf("instances=%d/deployments=%d/%s", g.n, g.nd, v.name), func(b *testing.B) {
				p := policy(v.set)
				snap := benchSnapshot(g.n, g.nd, 1)
				req := scheduler.Request{PromptTokens: 2048, Blocks: 128}
				rng := rand.New(rand.NewPCG(1, 2))
				var d scheduler.Decision
				// Size the reused Decision before timing, as a server would
				// have after its first pick on the pool.
				if err := scheduler.Decide(p, req, snap, rng, &d); err != nil {
					b.Fatal(err)
				}
				b.ReportAllocs()
				for b.Loop() {
					if err := scheduler.Decide(p, req, snap, rng, &d); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
