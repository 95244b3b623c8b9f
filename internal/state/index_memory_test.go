package state

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
)

// The documented live-heap cost of one (block, instance) pair in a pool,
// per-instance LRUs included (doc.go, SECURITY.md, docs/api.md,
// docs/operating.md): when each block is on one instance (measured 73-75 B
// at 2^18 and 2^20 pairs), and when each is on four (44-45 B). The process
// RSS is about twice the live heap (the Go collector's headroom at
// GOGC=100), so those documents state both.
const (
	pairBytesOneHolder  = 82
	pairBytesFourHolder = 50
)

// TestIndexBytesPerPair fills a pool with 2^18 pairs and checks the live
// heap per pair (runtime.MemStats.HeapAlloc after a GC, before and after)
// against the documented figures, so that they cannot silently drift below
// the truth (issue 32 F8: 82 B of live heap was documented as the whole
// cost, while the daemon's gauge says 124 B and the RSS grew by ~164 B).
func TestIndexBytesPerPair(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates about 50 MB")
	}
	const pairs = 1 << 18
	for _, tc := range []struct {
		holders int
		max     float64
	}{{1, pairBytesOneHolder}, {4, pairBytesFourHolder}} {
		t.Run(fmt.Sprintf("holders=%d", tc.holders), func(t *testing.T) {
			blocks := pairs / tc.holders
			hashes := make([]uint64, blocks)
			rng := rand.New(rand.NewPCG(1, 1))
			for i := range hashes {
				hashes[i] = rng.Uint64()
			}
			before := heapInUse()
			_, p := newTestPool(t, Limits{})
			for i := range tc.holders {
				connect(t, p, t0, "d", fmt.Sprintf("i%d", i), &Report{ReportsCacheEvents: true, KVCapacityBlocks: pairs})
			}
			p.mu.Lock()
			for _, h := range hashes {
				for k := range tc.holders {
					p.store(p.slots[k], h)
				}
			}
			p.mu.Unlock()
			after := heapInUse()
			if _, n := p.IndexStats(); n != pairs {
				t.Fatalf("%d pairs, want %d", n, pairs)
			}
			runtime.KeepAlive(p)
			per := float64(after-before) / pairs
			t.Logf("%d holders: %.1f bytes per pair", tc.holders, per)
			if per > tc.max {
				t.Errorf("%.1f bytes per pair, over the documented %.0f", per, tc.max)
			}
		})
	}
}
