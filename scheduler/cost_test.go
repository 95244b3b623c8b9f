package scheduler_test

import (
	"math"
	"testing"

	"github.com/prefixroute/prefixroute/scheduler"
)

func TestCostParts(t *testing.T) {
	tests := []struct {
		name      string
		prompt    uint32
		blocks    int
		in        scheduler.Instance
		batchWait float64
		doubling  float64 // Policy.DoublingContextTokens; 0: the linear model
		uncached  uint32
		work      uint32 // WorkTokens; uncached when 0
		prefill   float64
		queue     float64
	}{
		{
			name: "cold, policy throughput, queued tokens, assigned tokens, batch wait", prompt: 1000,
			in:        scheduler.Instance{QueuedPrefillTokens: 500, AssignedTokens: 200},
			batchWait: 5, uncached: 1000, prefill: 100, queue: 70,
		},
		{
			name: "partial hit, instance throughput", prompt: 100, blocks: 4,
			in:       scheduler.Instance{MatchedBlocks: 2, PrefillTokensPerSecond: 1000},
			uncached: 68, prefill: 68,
		},
		{
			name: "full hit", prompt: 64, blocks: 4,
			in:       scheduler.Instance{MatchedBlocks: 4, PrefillTokensPerSecond: 1000},
			uncached: 0, prefill: 0,
		},
		{
			name: "last block partial, never below zero", prompt: 70, blocks: 5,
			in:       scheduler.Instance{MatchedBlocks: 5, PrefillTokensPerSecond: 1000},
			uncached: 0, prefill: 0,
		},
		{
			name: "matched above Blocks is clamped", prompt: 100, blocks: 2,
			in:       scheduler.Instance{MatchedBlocks: 10, PrefillTokensPerSecond: 1000},
			uncached: 68, prefill: 68,
		},
		{
			name: "no block hashes: nothing cached", prompt: 100, blocks: 0,
			in:       scheduler.Instance{MatchedBlocks: 3, PrefillTokensPerSecond: 1000},
			uncached: 100, prefill: 100,
		},
		{
			name: "instance block size", prompt: 100, blocks: 4,
			in:       scheduler.Instance{MatchedBlocks: 2, BlockSizeTokens: 32, PrefillTokensPerSecond: 1000},
			uncached: 36, prefill: 36,
		},
		{
			name: "reported queue ms wins over queued tokens, assigned still added", prompt: 0,
			in: scheduler.Instance{
				HasQueueMs: true, QueueMs: 33, QueuedPrefillTokens: 1e6, AssignedTokens: 100,
				PrefillTokensPerSecond: 1000,
			},
			queue: 133,
		},
		{
			name: "huge figures do not overflow", prompt: math.MaxUint32, blocks: math.MaxInt,
			in:       scheduler.Instance{MatchedBlocks: math.MaxInt, BlockSizeTokens: math.MaxUint32},
			uncached: 0, prefill: 0,
		},
		{
			name: "one huge block", prompt: math.MaxUint32, blocks: 1,
			in:       scheduler.Instance{MatchedBlocks: 1, BlockSizeTokens: math.MaxUint32 - 1, PrefillTokensPerSecond: 1000},
			uncached: 1, prefill: 1,
		},
		{
			name: "attention term, cold: 1000·(1 + 500/1000)", prompt: 1000, doubling: 1000,
			in:       scheduler.Instance{PrefillTokensPerSecond: 1000, AssignedTokens: 300},
			uncached: 1000, work: 1500, prefill: 1500, queue: 300,
		},
		{
			name: "attention term, cached tokens are not free: 68·(1 + (32 + 34)/256)", prompt: 100, blocks: 4, doubling: 256,
			in:       scheduler.Instance{MatchedBlocks: 2, PrefillTokensPerSecond: 1000},
			uncached: 68, work: 86, prefill: 68 * (1 + 66.0/256),
		},
		{
			name: "attention term, 2048 new on 32768 cached at 17000 and 40000 tokens/s", prompt: 34816, blocks: 2048, doubling: 17000,
			in:       scheduler.Instance{MatchedBlocks: 2048, PrefillTokensPerSecond: 40000},
			uncached: 2048, work: 6119, prefill: 2048 * (1 + 33792/17000.0) / 40,
		},
		{
			name: "attention term, full hit costs nothing", prompt: 64, blocks: 4, doubling: 256,
			in: scheduler.Instance{MatchedBlocks: 4, PrefillTokensPerSecond: 1000},
		},
		{
			name: "excluded instances get cost parts too", prompt: 100,
			in:       scheduler.Instance{Draining: true, PrefillTokensPerSecond: 2000, AssignedTokens: 10},
			uncached: 100, prefill: 50, queue: 5,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := policy(func(p *scheduler.Policy) { p.BatchWaitMs, p.DoublingContextTokens = tt.batchWait, tt.doubling })
			snap := &scheduler.Snapshot{
				Deployments: deps(1),
				Instances:   []scheduler.Instance{tt.in, q(0, 1e9)}, // a second one keeps the pool eligible
			}
			var d scheduler.Decision
			_ = scheduler.Decide(p, scheduler.Request{PromptTokens: tt.prompt, Blocks: tt.blocks}, snap, draws(0, 0), &d)
			r := d.Instances[0]
			if r.UncachedTokens != tt.uncached {
				t.Errorf("UncachedTokens = %d, want %d", r.UncachedTokens, tt.uncached)
			}
			if want := max(tt.work, tt.uncached); r.WorkTokens != want {
				t.Errorf("WorkTokens = %d, want %d", r.WorkTokens, want)
			}
			near(t, "PrefillMs", r.PrefillMs, tt.prefill, 1e-12)
			near(t, "QueueMs", r.QueueMs, tt.queue, 1e-12)
			near(t, "BatchWaitMs", r.BatchWaitMs, tt.batchWait, 0)
			near(t, "CostMs", r.CostMs, tt.prefill+tt.queue+tt.batchWait, 1e-12)
		})
	}
}

// TestPrefillWeight: Request.PrefillWeight multiplies the prefill term of
// CostMs only (the parts stay as they are); 0 and 1 are the model's cost;
// below 1, NaN and infinity are refused.
func TestPrefillWeight(t *testing.T) {
	in := scheduler.Instance{QueuedPrefillTokens: 500, PrefillTokensPerSecond: 1000}
	for _, tt := range []struct {
		weight, cost float64
		bad          bool
	}{
		{0, 100 + 500, false}, {1, 100 + 500, false}, {3, 300 + 500, false},
		{0.5, 0, true}, {-1, 0, true}, {math.NaN(), 0, true}, {math.Inf(1), 0, true},
	} {
		snap := &scheduler.Snapshot{Deployments: deps(1), Instances: []scheduler.Instance{in, q(0, 1e9)}}
		var d scheduler.Decision
		p := policy(func(p *scheduler.Policy) { p.DoublingContextTokens = 0 })
		err := scheduler.Decide(p, scheduler.Request{PromptTokens: 100, PrefillWeight: tt.weight}, snap, draws(0, 0), &d)
		if tt.bad {
			if err == nil {
				t.Errorf("weight %v accepted", tt.weight)
			}
			continue
		}
		if err != nil {
			t.Fatalf("weight %v: %v", tt.weight, err)
		}
		r := d.Instances[0]
		near(t, "CostMs", r.CostMs, tt.cost, 1e-12)
		near(t, "PrefillMs", r.PrefillMs, 100, 1e-12)
		near(t, "QueueMs", r.QueueMs, 500, 1e-12)
		near(t, "Decision.PrefillWeight", d.PrefillWeight, max(1, tt.weight), 0)
	}
}
