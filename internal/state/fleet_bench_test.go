package state

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"
)

// Shape of the fleet benchmarks (issue 17): 10,000 exact-mode instances in
// 64 deployments, each holding fleetShared blocks every instance holds
// (a system prompt: bitset holders) and fleetOwn blocks of its own (inline
// holders), under a kv_capacity_blocks of fleetShared+fleetOwn, so that
// every new stored block evicts the instance's oldest one.
const (
	fleetInstances = 10000
	fleetDeps      = 64
	fleetShared    = 32
	fleetOwn       = 224
	fleetEvents    = 8 // stored block events per ingest report
)

// fleetPool builds the fleet pool and returns it with its sessions and the
// live heap measured before anything was added, after the instances
// connected and reported once (no blocks), and after they stored their
// blocks.
func fleetPool(b *testing.B) (p *Pool, sessions []*Session, heap [3]uint64) {
	b.Helper()
	heap[0] = heapInUse()
	_, p = newTestPool(b, Limits{MaxInstancesPerPool: fleetInstances})
	rep := Report{ReportsCacheEvents: true, KVCapacityBlocks: fleetShared + fleetOwn, QueuedPrefillTokens: 100,
		KVCacheUsage: 0.3, PrefillTokensPerSecond: 8000}
	for i := range fleetInstances {
		sessions = append(sessions, connect(b, p, t0, fmt.Sprintf("d%02d", i%fleetDeps), fmt.Sprintf("i%05d", i), &rep))
	}
	heap[1] = heapInUse()
	rng := rand.New(rand.NewPCG(1, 2))
	shared := make([]uint64, fleetShared)
	for k := range shared {
		shared[k] = rng.Uint64()
	}
	fill := rep
	for _, s := range sessions {
		fill.Stored = append(fill.Stored[:0], shared...)
		for range fleetOwn {
			fill.Stored = append(fill.Stored, rng.Uint64())
		}
		fill.Seq++
		if err := s.Report(t0, &fill); err != nil {
			b.Fatal(err)
		}
	}
	heap[2] = heapInUse()
	if _, pairs := p.IndexStats(); pairs != fleetInstances*(fleetShared+fleetOwn) {
		b.Fatalf("%d index entries, want %d", pairs, fleetInstances*(fleetShared+fleetOwn))
	}
	return p, sessions, heap
}

// BenchmarkFleet measures, on the fleet pool: "memory", the live heap per
// instance without cached blocks (records, sessions, template, index slot
// words) and per (block, instance) index entry (the index's holders and
// the instance's LRU node), from runtime.MemStats; "ingest", Session.Report
// with fleetEvents new stored blocks (each evicting the instance's oldest)
// round robin over the instances, in CPU ns of the reporting thread and in
// cores at 10 reports/s per instance (cores@10/s = cpu-ns/report × 10 ×
// 10,000 / 1e9). "memory" also reports the time to build the pool as
// build-s.
func BenchmarkFleet(b *testing.B) {
	start := time.Now()
	p, sessions, heap := fleetPool(b)
	build := time.Since(start).Seconds()
	_, pairs := p.IndexStats()
	b.Run("memory", func(b *testing.B) {
		for b.Loop() {
			runtime.KeepAlive(p)
		}
		b.ReportMetric(float64(heap[1]-heap[0])/fleetInstances, "heap-B/instance")
		b.ReportMetric(float64(heap[2]-heap[1])/float64(pairs), "heap-B/entry")
		b.ReportMetric(float64(heap[2]-heap[0])/fleetInstances, "heap-B/instance-with-blocks")
		b.ReportMetric(build, "build-s")
	})
	b.Run("ingest", func(b *testing.B) {
		rng := rand.New(rand.NewPCG(3, 4))
		rep := Report{ReportsCacheEvents: true, KVCapacityBlocks: fleetShared + fleetOwn, QueuedPrefillTokens: 100,
			KVCacheUsage: 0.3, PrefillTokensPerSecond: 8000, Stored: make([]uint64, fleetEvents)}
		now := t0
		i := 0
		b.ReportAllocs()
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		c0, cpuOK := threadCPU()
		for b.Loop() {
			for k := range rep.Stored {
				rep.Stored[k] = rng.Uint64()
			}
			rep.Seq++
			if i%fleetInstances == 0 {
				now = now.Add(100 * time.Millisecond)
			}
			if err := sessions[i%fleetInstances].Report(now, &rep); err != nil {
				b.Fatal(err)
			}
			i++
		}
		// CPU time of the reporting thread, which time other processes
		// take from it does not inflate (ns/op is wall clock).
		if c1, ok := threadCPU(); ok && cpuOK {
			perReport := float64((c1 - c0).Nanoseconds()) / float64(b.N)
			b.ReportMetric(perReport, "cpu-ns/report")
			b.ReportMetric(perReport*10*fleetInstances/1e9, "cores@10/s")
		}
	})
}
