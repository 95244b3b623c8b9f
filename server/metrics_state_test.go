package server

import (
	"context"
	"testing"
	"time"

	"github.com/prefixroute/prefixroute/internal/state"
)

// TestObserverHooksDoNotAllocate guards the hot path: once a pool's and its
// deployments' attribute sets exist, recording a pick allocates nothing.
func TestObserverHooksDoNotAllocate(t *testing.T) {
	s, now := obsPickServer(t, true)
	pool, err := s.reg.Pool("bench")
	if err != nil {
		t.Fatal(err)
	}
	req := obsPickRequest()
	var pk state.Pick
	sc := newPickScratch()
	if err := pool.Pick(now, &state.PickInput{Hashes: req.PrefixHashes, PromptTokens: req.PromptTokens}, sc.rng, &pk); err != nil {
		t.Fatal(err)
	}
	rec := pickRecord{req: req, pool: "bench", pk: &pk, seed: 1, elapsed: time.Microsecond,
		resp: pickResponse(&pk, 1, len(req.PrefixHashes), req.PromptTokens)}
	ctx := context.Background()
	counts := s.obs.reporting("bench", "d0")
	allocs := testing.AllocsPerRun(100, func() {
		s.obs.done(ctx, &rec)
		counts.reported()
	})
	if allocs != 0 {
		t.Errorf("recording a pick and a report allocates %v times", allocs)
	}
}
