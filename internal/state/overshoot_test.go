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
