package scheduler

import (
	"math"
	"testing"
	"time"
)

// FuzzValidateFastPath checks that Validate's fast path never accepts a
// policy that its explanation rejects, and the other way round.
func FuzzValidateFastPath(f *testing.F) {
	d := DefaultPolicy()
	f.Add(uint8(d.Strategy), d.LambdaH, d.DeltaMs, d.ThresholdRatio, d.ThresholdMinMs, d.BatchWaitMs, d.BlockSizeTokens,
		d.DefaultPrefillTokensPerSecond, d.MaxKVUsage, d.MaxQueueMs, d.DeploymentDeltaMs, int64(d.StaleAfter), int64(d.ForgetAfter), d.DefaultKVCapacityBlocks)
	f.Add(uint8(3), math.NaN(), -1.0, math.Inf(1), 0.0, math.Copysign(0, -1), uint32(0), 0.0, 1.0, 0.0, 5.0, int64(0), int64(-1), uint64(0))
	f.Add(uint8(2), 100.0, 5e-324, 0.0, 0.0, math.MaxFloat64, uint32(1), 1e-300, 1e-300, math.MaxFloat64, math.MaxFloat64, int64(1), int64(1), uint64(1<<30))
	f.Fuzz(func(t *testing.T, s uint8, lambda, delta, ratio, minMs, batch float64, bs uint32, tps, kv, maxQ, depDelta float64, stale, forget int64, kvCap uint64) {
		p := Policy{
			Strategy: Strategy(s), LambdaH: lambda, DeltaMs: delta, ThresholdRatio: ratio, ThresholdMinMs: minMs,
			BatchWaitMs: batch, BlockSizeTokens: bs, DefaultPrefillTokensPerSecond: tps, MaxKVUsage: kv,
			MaxQueueMs: maxQ, DeploymentDeltaMs: depDelta, StaleAfter: time.Duration(stale), ForgetAfter: time.Duration(forget),
			DefaultKVCapacityBlocks: kvCap,
		}
		if fast, slow := p.valid(), p.explain() == nil; fast != slow {
			t.Fatalf("fast path says valid=%v, explanation %v, for %+v", fast, p.explain(), p)
		}
	})
}
