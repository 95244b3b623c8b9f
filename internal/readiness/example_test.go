package readiness_test

import (
	"fmt"
	"time"

	"github.com/prefixroute/prefixroute/internal/readiness"
	"github.com/prefixroute/prefixroute/scheduler"
)

// exampleLive is the pool now: "old" at weight 1 and "new" at weight 9, two
// instances each prefilling 10 000 tokens/s; "old" caches every prefix,
// "new" the first 2 blocks of each.
type exampleLive struct{}

func (exampleLive) Deployments(dst []readiness.LiveDeployment) []readiness.LiveDeployment {
	return append(dst,
		readiness.LiveDeployment{Name: "old", Weight: 1, Instances: 2, PrefillTokensPerSecond: 20000},
		readiness.LiveDeployment{Name: "new", Weight: 9, Instances: 2, PrefillTokensPerSecond: 20000})
}

func (exampleLive) Depth(hashes []uint64, deployment string) int {
	if deployment == "old" {
		return len(hashes)
	}
	return min(2, len(hashes))
}

func ExampleTracker() {
	tr := readiness.New(readiness.Config{Window: time.Minute, Buckets: 12})
	start := time.Unix(1_700_000_000, 0)

	// One pick every second for 30 s: a 10-block (160-token) prefix cached
	// whole on old's instance 0 and 2 blocks deep on new, routed to old.
	snap := &scheduler.Snapshot{
		Deployments: []scheduler.Deployment{{Name: "old", Weight: 1}, {Name: "new", Weight: 9}},
		Instances: []scheduler.Instance{
			{ID: "old-0", Deployment: 0, MatchedBlocks: 10, BlockSizeTokens: 16},
			{ID: "new-0", Deployment: 1, MatchedBlocks: 2, BlockSizeTokens: 16},
		},
	}
	d := &scheduler.Decision{Deployment: 0, Instance: 0,
		Deployments: []scheduler.DeploymentResult{{MatchedBlocks: 10}, {MatchedBlocks: 2}},
		Instances:   []scheduler.InstanceResult{{UncachedTokens: 40, PrefillMs: 4}, {}},
	}
	hashes := []uint64{
		0x9e3779b97f4a7c15, 0xbf58476d1ce4e5b9, 0x94d049bb133111eb, 0x2545f4914f6cdd1d, 0x5851f42d4c957f2d,
		0x14057b7ef767814f, 0xd6e8feb86659fd93, 0xa0761d6478bd642f, 0xe7037ed1a0b428db, 0x8ebc6af09c88c6e3,
	}
	for s := range 30 {
		tr.Record(start.Add(time.Duration(s)*time.Second), hashes, 200, snap, d)
	}

	st, err := tr.Status(start.Add(30*time.Second), readiness.Query{From: "old", To: "new"}, exampleLive{})
	if err != nil {
		panic(err)
	}
	// moved = (200 − 10·16) tokens × 30 picks / 30 s = 40 tokens/s;
	// recompute = 8 blocks (2..9) × 16 = 128 tokens, 4.27 tokens/s; new
	// prefills 10 tokens/ms per instance: (40 + 4.27) / 10 = 4.43 ms/s of
	// its 2000 ms/s.
	m := st.Migration
	fmt.Printf("covered %v, %d picks\n", st.Covered, st.Picks)
	fmt.Printf("cached on old only: %.0f%% of requests\n", 100*m.CachedRequestShare)
	fmt.Printf("new would get %.0f%%: moved %.2f tokens/s, recompute %.0f tokens (%d blocks)\n",
		100*m.ToFraction, m.MovedPrefillTokensPerSec, m.RecomputeTokens, m.DistinctBlocks)
	fmt.Printf("extra %.2f ms/s on new, headroom %.2f%%, can absorb: %v\n", m.ExtraPrefillMsPerSec, m.HeadroomPct, m.CanAbsorb)
	for _, h := range st.HotPrefixes {
		fmt.Printf("hot %016x: %d requests, depth old %d new %d, %d tokens to warm\n",
			h.FirstBlockHash, h.Requests, h.DepthFrom, h.DepthTo, h.ExtraTokens)
	}
	// Output:
	// covered 30s, 30 picks
	// cached on old only: 100% of requests
	// new would get 100%: moved 40.00 tokens/s, recompute 128 tokens (8 blocks)
	// extra 4.43 ms/s on new, headroom 99.78%, can absorb: true
	// hot 9e3779b97f4a7c15: 30 requests, depth old 10 new 2, 128 tokens to warm
}
