package readiness

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/prefixroute/prefixroute/scheduler"
)

// TestInsertPairs: for random sinks (distinct columns, starting blocks
// from 0 to the end, ties, registers already partly set, 1 to 64 columns),
// insertPairs leaves every column as insertRegs of the sink's suffix does
// to that column alone, and the other columns as they were.
func TestInsertPairs(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 4))
	for trial := range 300 {
		p := []uint8{4, 8, 12}[trial%3]
		m := 1 << p
		stride := []int{1, 2, 4, 8, 16, 64}[rng.IntN(6)]
		hs := make([]uint64, rng.IntN(300))
		for i := range hs {
			hs[i] = rng.Uint64()
		}
		blk := make([]uint8, m*stride)
		for i := range blk {
			if rng.IntN(4) == 0 {
				blk[i] = uint8(rng.IntN(int(64 - p + 2)))
			}
		}
		column := func(c int) []uint8 {
			col := make([]uint8, m)
			maxColumn(col, blk, stride, c)
			return col
		}
		want := make([][]uint8, stride)
		var sinks []sketchSink
		for c, take := range rng.Perm(stride) {
			want[c] = column(c)
			if take >= rng.IntN(stride) {
				continue // not a sink
			}
			from := min(rng.IntN(len(hs)+2), len(hs))
			if len(sinks) > 0 && rng.IntN(3) == 0 {
				from = sinks[len(sinks)-1].from // ties
			}
			insertRegs(want[c], p, hs[from:])
			sinks = append(sinks, sketchSink{c, from})
		}
		insertPairs(blk, stride, p, hs, sinks)
		for c := range stride {
			if !slices.Equal(column(c), want[c]) {
				t.Fatalf("trial %d (p=%d, stride %d, %d hashes, sinks %v): column %d differs", trial, p, stride, len(hs), sinks, c)
			}
		}
	}
}

// TestRecordNameCache: two trackers get the same random Records — the
// snapshot's deployments drawn from more names than MaxDeployments, often
// the previous Record's list, time moving within and across windows so that
// slots are recycled — but one forgets its trackAll answer before each
// Record (every name looked up as track did before the cache). Their whole
// state must stay equal.
func TestRecordNameCache(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 9))
	cfg := Config{Window: 10 * time.Second, Buckets: 5, MaxDeployments: 4, SketchPrecision: 6, HotPrefixes: 8, MaxHotBlocks: 64}
	cached, plain := New(cfg), New(cfg)
	names := make([]string, 9)
	for i := range names {
		names[i] = fmt.Sprintf("dep-%d", i)
	}
	now := time.Unix(1_700_000_000, 0)
	var deps []scheduler.Deployment
	for step := range 4000 {
		switch r := rng.IntN(10); {
		case r == 0 || deps == nil: // a new list of 1-6 deployments, sometimes a repeat
			deps = deps[:0:0]
			for range 1 + rng.IntN(6) {
				deps = append(deps, scheduler.Deployment{Name: names[rng.IntN(len(names))], Weight: 1})
			}
		case r == 1: // the same names in new strings
			deps = slices.Clone(deps)
			for k := range deps {
				deps[k].Name = string([]byte(deps[k].Name))
			}
		}
		switch r := rng.IntN(100); {
		case r < 3:
			now = now.Add(time.Duration(rng.IntN(30)) * time.Second) // past the window
		case r < 40:
			now = now.Add(time.Duration(rng.IntN(3000)) * time.Millisecond)
		case r < 45:
			now = now.Add(-time.Duration(rng.IntN(4000)) * time.Millisecond) // late
		}
		snap := &scheduler.Snapshot{Deployments: deps}
		d := &scheduler.Decision{Deployment: rng.IntN(len(deps)), Instance: 0}
		blocks := rng.IntN(40)
		for range deps {
			d.Deployments = append(d.Deployments, scheduler.DeploymentResult{MatchedBlocks: rng.IntN(blocks + 2)})
		}
		snap.Instances = []scheduler.Instance{{Deployment: d.Deployment, MatchedBlocks: rng.IntN(blocks + 1), BlockSizeTokens: 16}}
		d.Instances = []scheduler.InstanceResult{{UncachedTokens: 10, PrefillMs: 1}}
		hs := make([]uint64, blocks)
		base := uint64(rng.IntN(20))
		for i := range hs {
			hs[i] = base*1000 + uint64(i)*0x9e3779b97f4a7c15
		}
		plain.ixNames = nil
		cached.Record(now, hs, uint32(blocks*16+5), snap, d)
		plain.Record(now, hs, uint32(blocks*16+5), snap, d)
		if err := sameState(cached, plain); err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
	}
}

// sameState compares what the trackers recorded (not their scratch).
func sameState(a, b *Tracker) error {
	switch {
	case !slices.Equal(a.names, b.names):
		return fmt.Errorf("names %q vs %q", a.names, b.names)
	case !slices.Equal(a.lastSeen, b.lastSeen):
		return fmt.Errorf("lastSeen %v vs %v", a.lastSeen, b.lastSeen)
	case !slices.Equal(a.blockSize, b.blockSize):
		return fmt.Errorf("blockSize %v vs %v", a.blockSize, b.blockSize)
	case a.head != b.head || a.first != b.first || a.late != b.late:
		return fmt.Errorf("head/first/late differ")
	case !slices.Equal(a.pool, b.pool) || !slices.Equal(a.deps, b.deps) || !slices.Equal(a.pairs, b.pairs):
		return fmt.Errorf("counts differ")
	case !slices.Equal(a.dirty, b.dirty):
		return fmt.Errorf("dirty differs")
	case !reflect.DeepEqual(a.regs, b.regs):
		return fmt.Errorf("registers differ")
	}
	return nil
}

// TestWiden: widening interleaved registers keeps every column and adds
// zero ones; blocks not allocated stay so.
func TestWiden(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 8))
	const m = 64
	for from := 1; from < 64; from *= 2 {
		regs := make([][]uint8, 3)
		for _, k := range []int{0, 2} {
			regs[k] = make([]uint8, m*from)
			for i := range regs[k] {
				regs[k][i] = uint8(1 + rng.IntN(60))
			}
		}
		before := make([][][]uint8, len(regs))
		for k, blk := range regs {
			if blk == nil {
				continue
			}
			for c := range from {
				col := make([]uint8, m)
				maxColumn(col, blk, from, c)
				before[k] = append(before[k], col)
			}
		}
		widen(regs, m, from, 2*from)
		if regs[1] != nil {
			t.Fatalf("from %d: an absent block was allocated", from)
		}
		for _, k := range []int{0, 2} {
			for c := range 2 * from {
				col := make([]uint8, m)
				maxColumn(col, regs[k], 2*from, c)
				want := make([]uint8, m)
				if c < from {
					want = before[k][c]
				}
				if !slices.Equal(col, want) {
					t.Fatalf("from %d: block %d column %d = %v, want %v", from, k, c, col, want)
				}
			}
		}
	}
}
