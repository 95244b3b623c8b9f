package state

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/prefixroute/prefixroute/scheduler"
)

// BenchmarkPickDisaggregated compares Pool.Pick in a disaggregated pool
// with an aggregated pool of the same size and figures (issue 30's aim: at
// most 1.3× the time): 64 instances in 4 deployments, exact mode, the
// Pick benchmark's requests with tails no instance holds (4,096 tokens,
// 3,584 uncached). In the
// disaggregated pool every fourth instance is a prefill instance (20,000
// tokens/s), the others decode instances (2,000 tokens/s), so most picks
// take the prefill stage's third draw; the aggregated pool has the same
// throughputs, every instance both.
func BenchmarkPickDisaggregated(b *testing.B) {
	for _, chosen := range []bool{true, false} {
		audit := map[bool]string{true: "chosen", false: "full"}[chosen]
		for _, disagg := range []bool{false, true} {
			name := map[bool]string{false: "aggregated", true: "disaggregated"}[disagg]
			b.Run(audit+"/"+name, func(b *testing.B) {
				const n, deps = 64, 4
				bp := newBenchPool(b, n, deps, true)
				bp.roles, bp.tps = make([]scheduler.Role, n), make([]float64, n)
				for i := range n {
					bp.tps[i] = 2000
					if (i/deps)%4 == 0 { // instance i is in deployment i%deps
						bp.tps[i] = 20000
						if disagg {
							bp.roles[i] = scheduler.RolePrefill
						}
					} else if disagg {
						bp.roles[i] = scheduler.RoleDecode
					}
				}
				// Tails no instance holds (exact mode records nothing): the
				// prefill stage is not cut short by a cached prompt.
				fresh := rand.New(rand.NewPCG(30, 39))
				for i := range bp.reqs {
					h := slices.Clone(bp.reqs[i].Hashes)
					for k := benchShared; k < len(h); k++ {
						h[k] = fresh.Uint64()
					}
					bp.reqs[i].Hashes = h
				}
				bp.reportAll(b)
				// The share of disaggregated picks, measured untimed on
				// the same requests before the timed loop.
				rng := rand.New(rand.NewPCG(3, 0))
				var pk Pick
				dis := 0
				for i := range 1000 {
					in := bp.reqs[i%len(bp.reqs)]
					in.ChosenOnly = chosen
					if err := bp.p.Pick(t0, &in, rng, &pk); err != nil {
						b.Fatal(err)
					}
					if pk.Decision.PD.Reason == scheduler.PDDisaggregated {
						dis++
					}
					if i%100 == 99 {
						bp.reportAll(b)
					}
				}
				if disagg && dis < 500 {
					b.Fatalf("%d of 1000 picks disaggregated; the benchmark would not measure the prefill stage", dis)
				}
				bp.reportAll(b)
				benchPickOn(b, bp, n, chosen)
				b.ReportMetric(float64(dis)/1000, "disaggregated/pick")
			})
		}
	}
}
