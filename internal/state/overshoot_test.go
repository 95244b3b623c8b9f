package state

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/prefixroute/prefixroute/scheduler"
)

// TestDispatchBoundedBetweenReports: issue 31's "dispatch never exceeds the
// saturation limit by more than 5 % between reports", measured on the
// router's own accounting. Two instances under max_queue_ms 100 report a
// seeded queue (0–150 ms) every interval; picks of 50–600 tokens (5–60 ms
// at 10,000 tokens/s) go out at the interval's instant until the pool is
// saturated. In each interval and instance, the queue a pick is admitted
// onto (the reported queue plus the work dispatched before it) never
// exceeds the limit; the queue after the last pick exceeds it by less than
// that pick's own work.
func TestDispatchBoundedBetweenReports(t *testing.T) {
	_, p := newTestPool(t, Limits{})
	cfg := DefaultConfig()
	cfg.Policy.MaxQueueMs, cfg.Policy.OnSaturation, cfg.Policy.DoublingContextTokens = 100, scheduler.SaturationQueue, 0
	p.SetConfig(cfg)
	ids := []string{"a", "b"}
	sess := map[string]*Session{}
	for _, id := range ids {
		sess[id] = connect(t, p, t0, "dep", id, &Report{PrefillTokensPerSecond: 10000})
	}
	rng := rand.New(rand.NewPCG(31, 5))
	var pk Pick
	const intervals, limit = 50, 100.0
	picks, maxAdmitted, maxAfter, maxOver := 0, 0.0, 0.0, 0.0
	for k := range intervals {
		now := t0.Add(time.Duration(k+1) * 50 * time.Millisecond)
		queue := map[string]float64{}
		for _, id := range ids {
			queue[id] = float64(rng.IntN(151))
			mustReport(t, sess[id], now, &Report{QueueMs: queue[id], HasQueueMs: true, PrefillTokensPerSecond: 10000})
		}
		for n := 0; ; n++ {
			in := &PickInput{Hashes: []uint64{uint64(k)<<20 | uint64(n)}, PromptTokens: uint32(50 + rng.IntN(551))}
			err := p.Pick(now, in, rng, &pk)
			if errors.Is(err, scheduler.ErrSaturated) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if n == 1000 {
				t.Fatalf("interval %d: 1000 picks and the pool is not saturated: the dispatched work is not counted", k)
			}
			r := pk.Decision.Instances[pk.Decision.Instance]
			id := pk.Snapshot.Instances[pk.Decision.Instance].ID
			own := float64(r.WorkTokens) / 10 // ms at 10,000 tokens/s
			if queue[id] > limit {
				t.Fatalf("interval %d: pick onto %s, which reported %v ms > %v ms", k, id, queue[id], limit)
			}
			maxAdmitted = max(maxAdmitted, queue[id])
			queue[id] += own
			maxAfter = max(maxAfter, queue[id])
			maxOver = max(maxOver, queue[id]-limit-own)
			picks++
		}
	}
	t.Logf("%d picks over %d intervals: admitted onto at most %.1f ms, at most %.1f ms after a pick (limit %v ms)", picks, intervals, maxAdmitted, maxAfter, limit)
	if maxAdmitted > limit+1e-9 || maxOver > 1e-9 {
		t.Errorf("admitted onto %.1f ms (limit %v ms), overshoot beyond one pick's work %.1f ms; want <= limit, <= 0", maxAdmitted, limit, maxOver)
	}
	if got, want := fmt.Sprintf("%d %.1f %.1f", picks, maxAdmitted, maxAfter), "124 100.0 150.3"; got != want {
		t.Errorf("picks, max admitted ms, max after ms = %s; want %s (exact for this seed)", got, want)
	}
}

// TestKVProjectedBetweenReports: the kv_full check adds the KV blocks of
// the uncached tokens picked onto an instance since its report (over its
// kv_capacity_blocks) to the reported usage. Two instances report 50 % of
// 1000 blocks; cold 1600-token picks take 100 blocks (10 %) each, so each
// instance takes exactly 5 (admitted at 50–90 %; at 100 % it is kv_full
// under max_kv_usage 0.95) and the 11th pick finds the pool saturated. A
// report resets the projection; an instance that reports no capacity is
// not projected.
func TestKVProjectedBetweenReports(t *testing.T) {
	for _, tc := range []struct {
		name     string
		capacity uint64
		want     int // picks before ErrSaturated (-1: none in 30)
	}{
		{"capacity reported", 1000, 10},
		{"no capacity reported", 0, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, p := newTestPool(t, Limits{})
			cfg := DefaultConfig()
			cfg.Policy.OnSaturation = scheduler.SaturationQueue
			p.SetConfig(cfg)
			rep := &Report{KVCacheUsage: 0.5, KVCapacityBlocks: tc.capacity, BlockSizeTokens: 16, ReportsCacheEvents: true}
			sess := []*Session{connect(t, p, t0, "dep", "a", rep), connect(t, p, t0, "dep", "b", rep)}
			rng := rand.New(rand.NewPCG(31, 6))
			var pk Pick
			hashes := make([]uint64, 100)
			next := uint64(1)
			picks := func(now time.Time) int {
				for n := 0; n < 30; n++ {
					for i := range hashes {
						hashes[i], next = next, next+1
					}
					err := p.Pick(now, &PickInput{Hashes: hashes, PromptTokens: 1600}, rng, &pk)
					if errors.Is(err, scheduler.ErrSaturated) {
						if pk.Decision.Excluded[scheduler.ReasonKVFull] != 2 {
							t.Fatalf("saturated with kv_full %d, want 2", pk.Decision.Excluded[scheduler.ReasonKVFull])
						}
						return n
					}
					if err != nil {
						t.Fatal(err)
					}
				}
				return -1
			}
			if got := picks(t0); got != tc.want {
				t.Fatalf("picks before saturation: %d, want %d", got, tc.want)
			}
			if tc.want < 0 {
				return
			}
			for _, st := range p.Instances(t0) {
				if st.AssignedKVBlocks != 500 {
					t.Errorf("%s: AssignedKVBlocks %d, want 500", st.Instance, st.AssignedKVBlocks)
				}
			}
			// A report of a (the engine has them now: 100 %) leaves it
			// full; one of 50 % frees it for 5 more.
			later := t0.Add(50 * time.Millisecond)
			mustReport(t, sess[0], later, &Report{KVCacheUsage: 1, KVCapacityBlocks: tc.capacity, BlockSizeTokens: 16, ReportsCacheEvents: true})
			if got := picks(later); got != 0 {
				t.Errorf("after a's report of 100 %%: %d picks, want 0", got)
			}
			mustReport(t, sess[0], later, rep)
			if got := picks(later); got != 5 {
				t.Errorf("after a's report of 50 %%: %d picks, want 5", got)
			}
		})
	}
}
