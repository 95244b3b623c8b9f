package server

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/internal/state"
	"github.com/prefixroute/prefixroute/scheduler"
)

// TestAuditReproducesCost: for 300 seeded random decisions (pools of 1–12
// instances with random throughputs, queues, hits and assigned work,
// random prefill weights, batch waits and doubling contexts), every
// audited instance's cost_ms is recomputed from its own fields alone —
// prefill_weight × prefill_ms + queue_ms + batch_wait_ms — and its
// predicted_ttft_ms is queue_ms + prefill_ms + batch_wait_ms; prefill_ms
// itself is recomputed from uncached_tokens, the decision's prompt_tokens,
// policy.doubling_context_tokens and prefill_tokens_per_second (the doc
// formulas of pick.proto). Before issue 29 the audit had no
// prefill_weight: cost_ms was off by (w − 1) × prefill_ms whenever the
// pool was backlogged.
func TestAuditReproducesCost(t *testing.T) {
	rel := func(got, want float64) bool { return math.Abs(got-want) <= 1e-12*max(1, math.Abs(want)) }
	weighted := 0
	for seed := range uint64(300) {
		rng := rand.New(rand.NewPCG(seed, 29))
		pk := &state.Pick{Config: state.DefaultConfig()}
		pol := &pk.Config.Policy
		pol.BatchWaitMs = float64(rng.IntN(3)) * rng.Float64() * 10
		switch rng.IntN(3) {
		case 0:
			pol.DoublingContextTokens = 0
		case 1:
			pol.DoublingContextTokens = 256 + rng.Float64()*50000
		}
		nd := 1 + rng.IntN(3)
		for k := range nd {
			pk.Snapshot.Deployments = append(pk.Snapshot.Deployments, scheduler.Deployment{Name: fmt.Sprint("d", k), Weight: 1 + float64(k)})
		}
		blocks := rng.IntN(64)
		prompt := uint32(blocks*16 + rng.IntN(400))
		for i := range 1 + rng.IntN(12) {
			in := scheduler.Instance{ID: fmt.Sprint("i", i), Deployment: i % nd, MatchedBlocks: rng.IntN(blocks + 1),
				AssignedTokens: uint64(rng.IntN(5000))}
			if rng.IntN(2) == 0 {
				in.PrefillTokensPerSecond = 1000 + rng.Float64()*50000
			}
			if rng.IntN(2) == 0 {
				in.HasQueueMs, in.QueueMs = true, rng.Float64()*300
			} else {
				in.QueuedPrefillTokens = uint64(rng.IntN(20000))
			}
			pk.Snapshot.Instances = append(pk.Snapshot.Instances, in)
			pk.Addresses = append(pk.Addresses, fmt.Sprint("10.0.0.", i))
		}
		w := 0.0
		if rng.IntN(3) > 0 {
			w = 1 + rng.Float64()*19
			weighted++
		}
		if err := scheduler.Decide(pol, scheduler.Request{PromptTokens: prompt, Blocks: blocks, PrefillWeight: w}, &pk.Snapshot,
			rng, &pk.Decision); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		for _, level := range []pb.AuditLevel{pb.AuditLevel_AUDIT_LEVEL_FULL, pb.AuditLevel_AUDIT_LEVEL_CHOSEN} {
			dec := pickResponseAt(level, pk, seed, blocks, prompt).GetDecision()
			c := dec.GetPolicy().GetDoublingContextTokens()
			for _, in := range dec.GetInstances() {
				if in.GetPrefillWeight() != max(1, w) {
					t.Fatalf("seed %d %v %s: prefill_weight %v, want %v", seed, level, in.GetInstanceId(), in.GetPrefillWeight(), max(1, w))
				}
				ttft := in.GetQueueMs() + in.GetPrefillMs() + in.GetBatchWaitMs()
				cost := in.GetPrefillWeight()*in.GetPrefillMs() + in.GetQueueMs() + in.GetBatchWaitMs()
				u := in.GetUncachedTokens()
				prefill := scheduler.PrefillWork(u, dec.GetPromptTokens()-u, c) * 1000 / in.GetPrefillTokensPerSecond()
				if !rel(in.GetPredictedTtftMs(), ttft) || !rel(in.GetCostMs(), cost) || !rel(in.GetPrefillMs(), prefill) {
					t.Fatalf("seed %d %v %s: cost_ms %v (recomputed %v), predicted_ttft_ms %v (%v), prefill_ms %v (%v)",
						seed, level, in.GetInstanceId(), in.GetCostMs(), cost, in.GetPredictedTtftMs(), ttft, in.GetPrefillMs(), prefill)
				}
			}
		}
	}
	if weighted < 150 {
		t.Fatalf("only %d of 300 decisions had a prefill weight", weighted)
	}
}
