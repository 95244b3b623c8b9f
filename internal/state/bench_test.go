package state

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/prefixroute/prefixroute/scheduler"
)

// Shape of the Pick benchmark's requests: 256 blocks of 16 tokens, the first
// 32 a system prompt every instance holds, the other 224 a per-request tail
// held by a few instances.
const (
	benchBlocks      = 256
	benchShared      = 32
	benchTails       = 256 // distinct requests
	benchTailHolders = 3   // instances holding each tail
	benchBlockTokens = 16
	benchCapacity    = 1 << 16 // kv_capacity_blocks: no eviction in steady state
	benchReportEvery = 4096    // picks between two rounds of reports (untimed)
)

type benchPool struct {
	p        *Pool
	sessions []*Session
	reqs     []PickInput
	exact    bool
	// roles and tps, when set, are every instance's role and prefill
	// throughput in its reports (pd_bench_test.go).
	roles []scheduler.Role
	tps   []float64
}

// newBenchPool builds a pool of n instances over deps deployments (equal
// configured weights), every instance holding the shared prefix and each
// request tail held by benchTailHolders instances. exact: instances report
// cache events (and their holdings arrive as stored events); otherwise the
// holdings are recorded as a pick would record them.
// The pool's MaxInstancesPerPool is raised to n.
func newBenchPool(b *testing.B, n, deps int, exact bool) *benchPool {
	b.Helper()
	_, p := newTestPool(b, Limits{MaxInstancesPerPool: max(n, 4096)})
	cfg := DefaultConfig()
	cfg.Weights = map[string]float64{}
	for d := range deps {
		cfg.Weights[fmt.Sprintf("d%02d", d)] = 1
	}
	p.SetConfig(cfg)
	rng := rand.New(rand.NewPCG(uint64(n), uint64(deps)))
	shared := make([]uint64, benchShared)
	for i := range shared {
		shared[i] = rng.Uint64()
	}
	held := make([][]uint64, n) // blocks per instance
	for i := range held {
		held[i] = slices.Clone(shared)
	}
	bp := &benchPool{p: p, exact: exact}
	for range benchTails {
		h := slices.Clone(shared)
		for range benchBlocks - benchShared {
			h = append(h, rng.Uint64())
		}
		for _, i := range rng.Perm(n)[:min(n, benchTailHolders)] {
			held[i] = append(held[i], h[benchShared:]...)
		}
		bp.reqs = append(bp.reqs, PickInput{Hashes: h, PromptTokens: benchBlocks * benchBlockTokens})
	}
	for i := range n {
		rep := &Report{KVCapacityBlocks: benchCapacity, ReportsCacheEvents: exact}
		if exact {
			rep.Stored = held[i]
		}
		s := connect(b, p, t0, fmt.Sprintf("d%02d", i%deps), fmt.Sprintf("i%04d", i), rep)
		bp.sessions = append(bp.sessions, s)
		if !exact {
			p.mu.Lock()
			for _, h := range held[i] {
				p.store(s.in, h)
			}
			p.mu.Unlock()
		}
	}
	return bp
}

// reportAll sends every instance a fresh report with no events, as the
// instances would between picks: it resets the optimistic accounting.
func (bp *benchPool) reportAll(b *testing.B) {
	rep := &Report{KVCapacityBlocks: benchCapacity, ReportsCacheEvents: bp.exact}
	for i, s := range bp.sessions {
		if bp.roles != nil {
			rep.Role, rep.PrefillTokensPerSecond = bp.roles[i], bp.tps[i]
		}
		if err := s.Report(t0, rep); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPick measures Pool.Pick (snapshot, prefix match, Decide,
// accounting) with a reused Pick. For 1000 instances it also reports the
// p50 and p99 latency of single calls.
func BenchmarkPick(b *testing.B) {
	for _, mode := range []string{"approx", "exact"} {
		for _, n := range []int{8, 64, 1000} {
			for _, deps := range []int{2, 16} {
				b.Run(fmt.Sprintf("%s/inst=%d/deps=%d", mode, n, deps), func(b *testing.B) {
					benchPick(b, n, deps, mode == "exact")
				})
			}
		}
	}
}

// BenchmarkPickScale measures exact-mode Pool.Pick at fleet scale, for the
// chosen deployment's audit (PickInput.ChosenOnly, what AUDIT_LEVEL_CHOSEN
// and NONE ask for) and the full one, with p50/p99 of single calls. The
// 10,000-instance pool also reports the live heap per instance and per
// (block, instance) pair of the pool it built (index, LRUs, template).
func BenchmarkPickScale(b *testing.B) {
	for _, g := range []struct{ n, deps int }{{1000, 16}, {10000, 64}} {
		var bp *benchPool
		var perInstance, perPair float64
		for _, audit := range []string{"chosen", "full"} {
			b.Run(fmt.Sprintf("inst=%d/deps=%d/audit=%s", g.n, g.deps, audit), func(b *testing.B) {
				if bp == nil {
					before := heapInUse()
					bp = newBenchPool(b, g.n, g.deps, true)
					after := heapInUse()
					_, pairs := bp.p.IndexStats()
					perInstance = float64(after-before) / float64(g.n)
					perPair = float64(after-before) / float64(pairs)
				}
				benchPickOn(b, bp, g.n, audit == "chosen")
				// After the loop: b.Loop's reset drops metrics reported before it.
				b.ReportMetric(perInstance, "heap-B/instance")
				b.ReportMetric(perPair, "heap-B/pair")
			})
		}
	}
}

func benchPick(b *testing.B, n, deps int, exact bool) {
	benchPickOn(b, newBenchPool(b, n, deps, exact), n, false)
}

func benchPickOn(b *testing.B, bp *benchPool, n int, chosenOnly bool) {
	for i := range bp.reqs {
		bp.reqs[i].ChosenOnly = chosenOnly
	}
	rng := rand.New(rand.NewPCG(7, 7))
	order := make([]int, 1<<16)
	for i := range order {
		order[i] = rng.IntN(len(bp.reqs))
	}
	var pk Pick
	timed := n >= 1000
	var lat, cpu []time.Duration
	if timed {
		lat = make([]time.Duration, 0, 1<<16)
		cpu = make([]time.Duration, 0, 1<<16)
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if i > 0 && i%benchReportEvery == 0 {
			b.StopTimer()
			bp.reportAll(b)
			b.StartTimer()
		}
		in := &bp.reqs[order[i%len(order)]]
		var start time.Time
		var c0 time.Duration
		if timed {
			c0, _ = threadCPU()
			start = time.Now()
		}
		if err := bp.p.Pick(t0, in, rng, &pk); err != nil {
			b.Fatal(err)
		}
		if timed {
			lat = append(lat, time.Since(start))
			if c1, ok := threadCPU(); ok {
				cpu = append(cpu, c1-c0)
			}
		}
		i++
	}
	if timed && len(lat) > 0 {
		slices.Sort(lat)
		b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-ns")
		b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "p99-ns")
	}
	// The calling thread's CPU time per pick (includes ~2 clock reads, a
	// syscall each): what a busy machine's stolen time does not inflate.
	if len(cpu) > 0 {
		slices.Sort(cpu)
		b.ReportMetric(float64(cpu[len(cpu)/2].Nanoseconds()), "cpu-p50-ns")
		b.ReportMetric(float64(cpu[len(cpu)*99/100].Nanoseconds()), "cpu-p99-ns")
	}
}

// BenchmarkReport measures Session.Report on a pool of 64 exact-mode
// instances, round robin, with 0 or 64 stored events per report. Every
// instance's LRU is filled to its capacity (4096 blocks) before timing, so
// each stored event is a new block that also evicts the oldest one: the
// steady state of a busy instance.
func BenchmarkReport(b *testing.B) {
	const n, capacity = 64, 4096
	for _, events := range []int{0, 64} {
		b.Run(fmt.Sprintf("stored=%d", events), func(b *testing.B) {
			_, p := newTestPool(b, Limits{})
			rng := rand.New(rand.NewPCG(1, 2))
			hashes := make([]uint64, 1<<20)
			for i := range hashes {
				hashes[i] = rng.Uint64()
			}
			rep := Report{ReportsCacheEvents: true, KVCapacityBlocks: capacity, QueuedPrefillTokens: 100, KVCacheUsage: 0.5}
			sessions := make([]*Session, n)
			off := 0
			for i := range sessions {
				sessions[i] = connect(b, p, t0, "d", fmt.Sprintf("i%02d", i), &rep)
				fill := rep
				fill.Stored = hashes[off : off+capacity]
				off += capacity
				if err := sessions[i].Report(t0, &fill); err != nil {
					b.Fatal(err)
				}
			}
			if _, pairs := p.IndexStats(); pairs != n*capacity {
				b.Fatalf("prefill: %d pairs", pairs)
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				rep.Seq = uint64(i)
				if events > 0 {
					if off+events > len(hashes) {
						off = 0
					}
					rep.Stored = hashes[off : off+events]
					off += events
				}
				if err := sessions[i%n].Report(t0, &rep); err != nil {
					b.Fatal(err)
				}
				i++
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "reports/s")
		})
	}
}

// heapInUse returns the live heap after a full collection.
func heapInUse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// BenchmarkIndexMemory fills an index with about 1<<20 (block, instance)
// pairs and reports the live heap per pair: "index" is the pool's prefix
// index alone, "pool" adds the per-instance LRUs (the real cost of a pair).
// holders is how many instances hold each block (1: sparse lists; 16 of 64
// and 1000 of 1000: bitsets). ns/op is the time to fill it.
func BenchmarkIndexMemory(b *testing.B) {
	const pairs = 1 << 20
	for _, tc := range []struct {
		slots, holders int
	}{{64, 1}, {64, 2}, {64, 16}, {1000, 1000}} {
		blocks := pairs / tc.holders
		hashes := make([]uint64, blocks)
		rng := rand.New(rand.NewPCG(1, 1))
		for i := range hashes {
			hashes[i] = rng.Uint64()
		}
		b.Run(fmt.Sprintf("index/slots=%d/holders=%d", tc.slots, tc.holders), func(b *testing.B) {
			fill := func() *prefixIndex {
				x := newIndexFor(tc.slots)
				for i, h := range hashes {
					for k := range tc.holders {
						x.add(h, uint32((i+k*tc.slots/tc.holders)%tc.slots))
					}
				}
				return &x
			}
			before := heapInUse()
			x := fill()
			after := heapInUse()
			if x.pairs != blocks*tc.holders {
				b.Fatalf("%d pairs", x.pairs)
			}
			runtime.KeepAlive(x)
			perPair := float64(after-before) / float64(x.pairs)
			b.ReportAllocs()
			for b.Loop() {
				fill()
			}
			b.ReportMetric(perPair, "bytes/pair")
		})
		b.Run(fmt.Sprintf("pool/slots=%d/holders=%d", tc.slots, tc.holders), func(b *testing.B) {
			fill := func() *Pool {
				_, p := newTestPool(b, Limits{})
				for i := range tc.slots {
					connect(b, p, t0, "d", fmt.Sprintf("i%04d", i), &Report{ReportsCacheEvents: true, KVCapacityBlocks: pairs})
				}
				p.mu.Lock()
				for i, h := range hashes {
					for k := range tc.holders {
						p.store(p.slots[(i+k*tc.slots/tc.holders)%tc.slots], h)
					}
				}
				p.mu.Unlock()
				return p
			}
			before := heapInUse()
			p := fill()
			after := heapInUse()
			if _, n := p.IndexStats(); n != blocks*tc.holders {
				b.Fatalf("%d pairs", n)
			}
			runtime.KeepAlive(p)
			perPair := float64(after-before) / float64(blocks*tc.holders)
			b.ReportAllocs()
			for b.Loop() {
				fill()
			}
			b.ReportMetric(perPair, "bytes/pair")
		})
	}
}

// BenchmarkPickParts splits a 1000-instance, 16-deployment, exact-mode Pick
// into its stages, to show where the time goes: the prefix match alone, the
// whole snapshot (match included, under the read lock), and Decide alone on
// a ready snapshot.
func BenchmarkPickParts(b *testing.B) {
	bp := newBenchPool(b, 1000, 16, true)
	rng := rand.New(rand.NewPCG(7, 7))
	order := make([]int, 1<<12)
	for i := range order {
		order[i] = rng.IntN(len(bp.reqs))
	}
	var pk Pick
	if err := bp.p.Pick(t0, &bp.reqs[0], rng, &pk); err != nil {
		b.Fatal(err)
	}
	bp.reportAll(b)
	b.Run("match", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			in := &bp.reqs[order[i%len(order)]]
			bp.p.mu.RLock()
			bp.p.index.match(in.Hashes, pk.live, pk.matched, pk.active, pk.nextBS)
			bp.p.mu.RUnlock()
			i++
		}
	})
	b.Run("snapshot", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			bp.p.snapshot(t0, &bp.reqs[order[i%len(order)]], &pk)
			i++
		}
	})
	b.Run("decide", func(b *testing.B) {
		in := &bp.reqs[0]
		bp.p.snapshot(t0, in, &pk)
		req := scheduler.Request{PromptTokens: in.PromptTokens, Blocks: len(in.Hashes)}
		b.ReportAllocs()
		for b.Loop() {
			if err := scheduler.Decide(&pk.Config.Policy, req, &pk.Snapshot, rng, &pk.Decision); err != nil {
				b.Fatal(err)
			}
		}
	})
}
