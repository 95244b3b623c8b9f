package scheduler_test

import (
	"testing"

	"github.com/prefixroute/prefixroute/scheduler"
)

// TestLedgerQueue: the report's queue capped by the ledger's sum of its
// latest waiting + running picks (600 tokens for the three picks of 100,
// 200 and 300 here, 500 for the latest two, 300 for the latest one).
func TestLedgerQueue(t *testing.T) {
	for _, tc := range []struct {
		name       string
		q          scheduler.ReportedQueue
		picked     uint64
		known      bool
		tps        float64
		wantDepth  uint64
		wantTokens uint64
		wantMs     float64
	}{
		{"nothing waiting or running: as reported", scheduler.ReportedQueue{Tokens: 50, Ms: 5, HasMs: true}, 0, true, 0, 0, 50, 5},
		{"whole prompts capped by the last two picks", scheduler.ReportedQueue{Waiting: 2, Tokens: 5000, Ms: 250, HasMs: true, TokensPerSecond: 20000}, 500, true, 0, 2, 500, 25},
		{"waiting + running picks", scheduler.ReportedQueue{Waiting: 1, Running: 2, Tokens: 5000, Ms: 250, HasMs: true, TokensPerSecond: 20000}, 600, true, 0, 3, 600, 30},
		{"an uncached report below the ledger stands", scheduler.ReportedQueue{Waiting: 3, Tokens: 400, Ms: 20, HasMs: true, TokensPerSecond: 20000}, 600, true, 0, 3, 400, 20},
		{"picks the ledger does not hold: as reported", scheduler.ReportedQueue{Waiting: 4, Tokens: 9000, Ms: 450, HasMs: true, TokensPerSecond: 20000}, 0, false, 0, 4, 9000, 450},
		{"no queue_ms: tokens capped only", scheduler.ReportedQueue{Waiting: 1, Tokens: 9000}, 300, true, 10000, 1, 300, 0},
		{"no reported throughput: the default", scheduler.ReportedQueue{Waiting: 1, Tokens: 9000, Ms: 900, HasMs: true}, 300, true, 10000, 1, 300, 30},
		{"no throughput at all: ms as reported", scheduler.ReportedQueue{Waiting: 1, Tokens: 9000, Ms: 900, HasMs: true}, 300, true, 0, 1, 300, 900},
		{"the reported throughput over the default", scheduler.ReportedQueue{Running: 1, Tokens: 9000, Ms: 900, HasMs: true, TokensPerSecond: 1000}, 300, true, 10000, 1, 300, 300},
		{"depth beyond uint32", scheduler.ReportedQueue{Waiting: 1<<32 - 1, Running: 1, Tokens: 7}, 0, false, 0, 1 << 32, 7, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if d := scheduler.LedgerDepth(tc.q); d != tc.wantDepth {
				t.Errorf("LedgerDepth = %d, want %d", d, tc.wantDepth)
			}
			tokens, ms := scheduler.LedgerQueue(tc.q, tc.picked, tc.known, tc.tps)
			if tokens != tc.wantTokens || ms != tc.wantMs {
				t.Fatalf("LedgerQueue = %d tokens, %v ms; want %d, %v", tokens, ms, tc.wantTokens, tc.wantMs)
			}
		})
	}
}
