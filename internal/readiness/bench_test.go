package readiness_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/prefixroute/prefixroute/internal/readiness"
	"github.com/prefixroute/prefixroute/scheduler"
)

// benchPick is one recorded pick of the benchmarks: a real Decide on a
// 64-instance snapshot.
type benchPick struct {
	hashes []uint64
	prompt uint32
	snap   *scheduler.Snapshot
	d      *scheduler.Decision
}

// benchPicks returns n picks over nd deployments of 64 instances (block
// size 16), 256-block prefixes drawn from families prefix families, each
// instance matching a seeded random depth; worst makes deployment 0 hold
// every prefix whole and the others none (every pick then counts 256
// blocks per pair).
func benchPicks(n, nd, families int, worst bool) []benchPick {
	rng := rand.New(rand.NewPCG(1, 2))
	chains := make([][]uint64, families)
	for f := range chains {
		chains[f] = chain(uint64(f), 256)
	}
	p := scheduler.DefaultPolicy()
	out := make([]benchPick, n)
	for k := range out {
		snap := &scheduler.Snapshot{}
		for j := range nd {
			snap.Deployments = append(snap.Deployments, scheduler.Deployment{Name: fmt.Sprintf("dep-%d", j), Weight: 1})
		}
		for i := range 64 {
			m := rng.IntN(257)
			if worst {
				m = 0
				if i%nd == 0 {
					m = 256
				}
			}
			snap.Instances = append(snap.Instances, scheduler.Instance{ID: fmt.Sprint(i), Deployment: i % nd,
				MatchedBlocks: m, BlockSizeTokens: 16, PrefillTokensPerSecond: 10000})
		}
		req := scheduler.Request{PromptTokens: 256*16 + 100, Blocks: 256}
		d := &scheduler.Decision{}
		if err := scheduler.Decide(&p, req, snap, rng, d); err != nil {
			panic(err)
		}
		out[k] = benchPick{chains[rng.IntN(families)], req.PromptTokens, snap, d}
	}
	return out
}

// BenchmarkRecord measures Record warm: the tracker has run a whole window
// (so every bucket's sketches exist and the hot chains have grown) before
// timing; each op advances the clock 1 ms, so the window slides a bucket
// every 5000 ops and its clearing is included.
func BenchmarkRecord(b *testing.B) {
	for _, c := range []struct {
		name         string
		nd, families int
		worst        bool
	}{
		{"deployments=2/depths=random", 2, 32, false},
		{"deployments=2/depths=256-vs-0", 2, 32, true},
		{"deployments=2/families=4096-evicting", 2, 4096, false},
		{"deployments=8/depths=random", 8, 32, false},
	} {
		b.Run(c.name, func(b *testing.B) {
			picks := benchPicks(512, c.nd, c.families, c.worst)
			tr := readiness.New(readiness.Config{})
			now := t0
			i := 0
			step := func() {
				p := &picks[i%len(picks)]
				tr.Record(now, p.hashes, p.prompt, p.snap, p.d)
				now = now.Add(time.Millisecond)
				i++
			}
			for range 5*60*1000 + 5000 {
				step()
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				step()
			}
		})
	}
}

// BenchmarkStatus measures Status on a full window of 2 deployments with
// 256 hot prefixes of 256 blocks, Live answering depths in O(1).
func BenchmarkStatus(b *testing.B) {
	picks := benchPicks(512, 2, 256, false)
	tr := readiness.New(readiness.Config{})
	now := t0
	for i := range 5 * 60 * 1000 {
		p := &picks[i%len(picks)]
		tr.Record(now, p.hashes, p.prompt, p.snap, p.d)
		now = now.Add(time.Millisecond)
	}
	live := benchLive{}
	q := readiness.Query{From: "dep-0", To: "dep-1", TopK: 10}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := tr.Status(now, q, live); err != nil {
			b.Fatal(err)
		}
	}
}

type benchLive struct{}

func (benchLive) Deployments(dst []readiness.LiveDeployment) []readiness.LiveDeployment {
	return append(dst,
		readiness.LiveDeployment{Name: "dep-0", Weight: 1, Instances: 32, PrefillTokensPerSecond: 320000},
		readiness.LiveDeployment{Name: "dep-1", Weight: 9, Instances: 32, PrefillTokensPerSecond: 320000})
}

func (benchLive) Depth(hashes []uint64, deployment string) int {
	if deployment == "dep-0" {
		return len(hashes)
	}
	return len(hashes) / 4
}
