package server

import (
	"context"
	"slices"
	"testing"
	"time"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/frontend"
	"github.com/prefixroute/prefixroute/internal/rollout"
	"github.com/prefixroute/prefixroute/internal/store"
)

// TestMarkerOf names each kind of configuration change, and none for a
// policy change.
func TestMarkerOf(t *testing.T) {
	ramp := func(id uint64, st rollout.State, applied int) *rollout.Ramp {
		return &rollout.Ramp{ID: id, State: st, Applied: applied, Steps: make([]rollout.Step, 4)}
	}
	w := func(v uint64, r *rollout.Ramp) *store.PoolConfig {
		return &store.PoolConfig{WeightsVersion: v, Ramp: r}
	}
	for _, c := range []struct {
		name        string
		prev        *store.PoolConfig
		next        *store.PoolConfig
		kind, label string
	}{
		{"first weights", nil, w(1, nil), "weights", "weights v1"},
		{"weights set", w(1, nil), w(2, nil), "weights", "weights v2"},
		{"policy only", w(2, nil), w(2, nil), "", ""},
		{"ramp started", w(2, nil), w(2, ramp(1, rollout.Running, 0)), "ramp", "ramp 1 started"},
		{"ramp step", w(2, ramp(1, rollout.Running, 0)), w(3, ramp(1, rollout.Running, 1)), "ramp", "ramp 1 step 1/4"},
		{"last step", w(5, ramp(1, rollout.Running, 3)), w(6, ramp(1, rollout.Done, 4)), "ramp", "ramp 1 step 4/4 (done)"},
		{"ramp paused", w(3, ramp(1, rollout.Running, 1)), w(3, ramp(1, rollout.Paused, 1)), "ramp", "ramp 1 paused"},
		{"ramp aborted", w(3, ramp(1, rollout.Paused, 1)), w(3, ramp(1, rollout.Aborted, 1)), "ramp", "ramp 1 aborted"},
		{"next ramp", w(6, ramp(1, rollout.Done, 4)), w(6, ramp(2, rollout.Running, 0)), "ramp", "ramp 2 started"},
		{"after a restart, mid-ramp", nil, w(4, ramp(1, rollout.Running, 2)), "ramp", "ramp 1 step 2/4"},
		{"weights after an old ramp", w(6, ramp(1, rollout.Done, 4)), w(7, ramp(1, rollout.Done, 4)), "weights", "weights v7"},
	} {
		t.Run(c.name, func(t *testing.T) {
			kind, label := markerOf(c.prev, *c.next)
			if kind != c.kind || label != c.label {
				t.Errorf("markerOf = %q %q; want %q %q", kind, label, c.kind, c.label)
			}
		})
	}
}

// TestHistory: picks land in their second's bucket, older than 15 minutes
// fall out, failures count by outcome, instances' picks/s are over the
// last 5 s, and SetWeights leaves a marker with the shares before and after.
func TestHistory(t *testing.T) {
	s, now := obsPickServer(t, true)
	clock := now // the observer's clock; the pool's stays at now, when the instances reported
	s.obs.now = func() time.Time { return clock }
	ctx := context.Background()
	req := obsPickRequest()
	pick := func(n int) {
		for range n {
			if _, err := s.PickFor(ctx, req, frontend.PickMeta{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	pick(3) // at now - 15 min: out of the window by the end
	clock = now.Add(historySeconds * time.Second)
	pick(2)
	clock = clock.Add(time.Second)
	pick(5)
	if _, err := s.PickFor(ctx, &pb.PickRequest{Pool: "bench", PrefixHashes: make([]uint64, 1<<20)}, frontend.PickMeta{}); err == nil {
		t.Fatal("a pick over the block limit succeeded")
	}
	as := &adminService{s: s}
	if _, err := as.SetWeights(ctx, &pb.SetWeightsRequest{AllowNewPool: true, Pool: "bench", Weights: map[string]float64{"d0": 1, "d1": 3}}); err != nil {
		t.Fatal(err)
	}
	h, ok := s.obs.history("bench", clock)
	if !ok {
		t.Fatal("no history for bench")
	}
	if h.Seconds != historySeconds || h.Start != clock.Unix()-historySeconds+1 {
		t.Fatalf("window %d s from %d; want %d s from %d", h.Seconds, h.Start, historySeconds, clock.Unix()-historySeconds+1)
	}
	var total, last, prev uint32
	for _, d := range h.Deployments {
		for _, p := range d.Picks {
			total += p
		}
		last += d.Picks[historySeconds-1]
		prev += d.Picks[historySeconds-2]
	}
	if total != 7 || last != 5 || prev != 2 {
		t.Errorf("picks: %d in the window, %d in the last second, %d before; want 7, 5, 2", total, last, prev)
	}
	if len(h.Failures) != 1 || h.Failures[0].Outcome != "invalid" || h.Failures[0].Picks[historySeconds-1] != 1 {
		t.Errorf("failures %+v; want one invalid in the last second", h.Failures)
	}
	var rate float64
	for _, r := range h.InstancePicks {
		rate += r
	}
	if rate != 7.0/frontend.InstanceRateSeconds {
		t.Errorf("instance picks/s sum to %v; want %v", rate, 7.0/frontend.InstanceRateSeconds)
	}
	if len(h.Markers) != 1 {
		t.Fatalf("markers %+v; want one", h.Markers)
	}
	m := h.Markers[0]
	if m.Kind != "weights" || m.Label != "weights v1" || m.At != clock.UnixMilli() || m.Before["d0"] != 0.5 || m.After["d1"] != 0.75 {
		t.Errorf("marker %+v", m)
	}
	if _, ok := s.obs.history("nope", clock); ok {
		t.Error("history of a pool nobody picked from")
	}
}

// TestHistoryMarkersBounded: markers older than the window go, but for the
// last one before it (it holds the weights at the window's start), and at
// most maxMarkers stay.
func TestHistoryMarkersBounded(t *testing.T) {
	o := &observer{pools: map[string]*poolObs{}}
	clock := time.Unix(1_800_000_000, 0)
	o.now = func() time.Time { return clock }
	p := newPoolObs("p")
	p.rings, p.fails = &o.rings, &failRing{}
	o.pools["p"] = p
	for v := range uint64(maxMarkers + 10) {
		o.published("p", nil, store.PoolConfig{WeightsVersion: v + 1}, nil)
		clock = clock.Add(time.Second)
	}
	if n := len(p.fails.marks); n != maxMarkers {
		t.Errorf("%d markers kept; want %d", n, maxMarkers)
	}
	clock = clock.Add(time.Hour)
	o.published("p", nil, store.PoolConfig{WeightsVersion: 1000}, nil)
	got := make([]uint64, 0, 2)
	for _, m := range p.fails.marks {
		got = append(got, m.WeightsVersion)
	}
	if !slices.Equal(got, []uint64{maxMarkers + 10, 1000}) {
		t.Errorf("after an hour: markers of versions %v; want [%d 1000]", got, maxMarkers+10)
	}
}

// TestRingBudget: rings stop at maxHistoryRings.
func TestRingBudget(t *testing.T) {
	var b ringBudget
	n := 0
	for range maxHistoryRings + 5 {
		if b.take() {
			n++
		}
	}
	if n != maxHistoryRings {
		t.Errorf("%d rings handed out; want %d", n, maxHistoryRings)
	}
}
