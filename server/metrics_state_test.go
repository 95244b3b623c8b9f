package server

import (
	"context"
	"testing"
	"time"

	"github.com/prefixroute/prefixroute/internal/state"
)

// TestWindow checks which one-second buckets the sliding window sums.
func TestWindow(t *testing.T) {
	type add struct {
		sec             int64
		blocks, matched uint64
	}
	for _, c := range []struct {
		name                   string
		adds                   []add
		at                     int64
		picks, blocks, matched uint64
	}{
		{"empty", nil, 1000, 0, 0, 0},
		{"one second", []add{{1000, 4, 2}, {1000, 4, 4}}, 1000, 2, 8, 6},
		{"whole window", []add{{941, 1, 1}, {970, 1, 0}, {1000, 1, 1}}, 1000, 3, 3, 2},
		{"older than the window", []add{{940, 9, 9}, {941, 1, 1}}, 1000, 1, 1, 1},
		{"a bucket reused by a later second", []add{{940, 9, 9}, {1000, 1, 0}}, 1000, 1, 1, 0},
		{"not yet", []add{{1001, 1, 1}}, 1000, 0, 0, 0},
		{"negative seconds", []add{{-5, 1, 1}}, -5, 1, 1, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			var w window
			for _, a := range c.adds {
				w.add(a.sec, a.blocks, a.matched, "i")
			}
			p, b, m := w.sum(c.at)
			if p != c.picks || b != c.blocks || m != c.matched {
				t.Errorf("sum(%d) = %d, %d, %d; want %d, %d, %d", c.at, p, b, m, c.picks, c.blocks, c.matched)
			}
		})
	}
}

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

// BenchmarkWindowAdd is the traffic window's cost per pick (the reason
// metrics_state.go gives for keeping it beside the readiness window).
func BenchmarkWindowAdd(b *testing.B) {
	var w window
	sec := int64(1_800_000_000)
	for i := 0; b.Loop(); i++ {
		w.add(sec+int64(i>>16), 32, 16, "i")
	}
}

// BenchmarkWindowAddHistory is BenchmarkWindowAdd with the console's
// 15-minute ring on (history.go): the same lock, three more adds and one
// map lookup by instance id.
func BenchmarkWindowAddHistory(b *testing.B) {
	w := window{hist: &history{inst: make(map[string]*instRate)}}
	ids := []string{"a-1", "a-2", "b-1", "b-2"}
	sec := int64(1_700_000_000)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		w.add(sec+int64(i>>16), 32, 16, ids[i&3])
		i++
	}
}
