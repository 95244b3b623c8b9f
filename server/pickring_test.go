package server

import (
	"maps"
	"slices"
	"testing"

	"github.com/prefixroute/prefixroute/frontend"
)

// TestPickRingSum checks which one-second buckets the gauges' sum covers,
// in a ring with the console's history and in one without.
func TestPickRingSum(t *testing.T) {
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
		{"a bucket reused by a later second", []add{{100, 9, 9}, {1000, 1, 0}}, 1000, 1, 1, 0},
		{"not yet", []add{{1001, 1, 1}}, 1000, 0, 0, 0},
		{"negative seconds", []add{{-5, 1, 1}}, -5, 1, 1, 1},
		{"saturated", []add{{1000, 1 << 32, 1}, {1000, 1, 1 << 40}}, 1000, 2, 1<<32 - 1, 1<<32 - 1},
	} {
		for _, history := range []bool{false, true} {
			var r pickRing
			r.init(history)
			for _, a := range c.adds {
				r.add(a.sec, a.blocks, a.matched, "i")
			}
			p, b, m := r.sum(c.at)
			if p != c.picks || b != c.blocks || m != c.matched {
				t.Errorf("%s (history %v): sum(%d) = %d, %d, %d; want %d, %d, %d", c.name, history, c.at, p, b, m, c.picks, c.blocks, c.matched)
			}
		}
	}
}

// TestPickRingSeries: the console reads the buckets the gauges sum, over
// historySeconds, with each instance's picks/s over its last
// InstanceRateSeconds; a ring without history shows none.
func TestPickRingSeries(t *testing.T) {
	const now = int64(1_800_000_000)
	start := now - historySeconds + 1
	fill := func(r *pickRing) {
		r.add(start-1, 5, 5, "a") // before the history
		r.add(start, 2, 1, "a")
		r.add(now-windowBuckets, 3, 3, "a") // in the history, not in the gauges' window
		for range 10 {
			r.add(now, 4, 2, "b")
		}
		r.add(now-frontend.InstanceRateSeconds+1, 1, 0, "a")
	}
	newSeries := func() frontend.DeploymentSeries {
		return frontend.DeploymentSeries{Picks: make([]uint32, historySeconds),
			Blocks: make([]uint32, historySeconds), Matched: make([]uint32, historySeconds)}
	}
	var r pickRing
	r.init(true)
	fill(&r)
	s, rates := newSeries(), map[string]float64{}
	r.series(&s, start, rates)
	var picks, blocks, matched uint64
	for i := historySeconds - windowBuckets; i < historySeconds; i++ {
		picks, blocks, matched = picks+uint64(s.Picks[i]), blocks+uint64(s.Blocks[i]), matched+uint64(s.Matched[i])
	}
	if p, b, m := r.sum(now); p != picks || b != blocks || m != matched || p != 11 {
		t.Errorf("gauges sum %d, %d, %d; the console's last %d s %d, %d, %d; want equal, 11 picks", p, b, m, windowBuckets, picks, blocks, matched)
	}
	if s.Picks[0] != 1 || s.Blocks[0] != 2 || s.Picks[historySeconds-1-windowBuckets] != 1 || s.Picks[historySeconds-1] != 10 {
		t.Errorf("series picks at start %d (blocks %d), at now-%d %d, at now %d; want 1 (2), 1, 10",
			s.Picks[0], s.Blocks[0], windowBuckets, s.Picks[historySeconds-1-windowBuckets], s.Picks[historySeconds-1])
	}
	if want := map[string]float64{"a": 1.0 / frontend.InstanceRateSeconds, "b": 10.0 / frontend.InstanceRateSeconds}; !maps.Equal(rates, want) {
		t.Errorf("instance rates %v; want %v", rates, want)
	}

	var short pickRing
	short.init(false)
	fill(&short)
	s, rates = newSeries(), map[string]float64{}
	short.series(&s, start, rates)
	if slices.ContainsFunc(s.Picks, func(n uint32) bool { return n != 0 }) || len(rates) != 0 {
		t.Errorf("a ring without history shows picks %v... or rates %v", s.Picks[historySeconds-3:], rates)
	}
	if p, _, _ := short.sum(now); p != 11 {
		t.Errorf("a ring without history sums %d picks; want 11", p)
	}
}

// BenchmarkPickRingAdd is a deployment's recent-picks cost per pick in a
// ring without history (past the history budget): the gauges' part.
func BenchmarkPickRingAdd(b *testing.B) {
	var r pickRing
	r.init(false)
	sec := int64(1_800_000_000)
	for i := 0; b.Loop(); i++ {
		r.add(sec+int64(i>>16), 32, 16, "i")
	}
}

// BenchmarkPickRingAddHistory is BenchmarkPickRingAdd in a ring with the
// console's history: one map lookup by instance id more.
func BenchmarkPickRingAddHistory(b *testing.B) {
	var r pickRing
	r.init(true)
	ids := []string{"a-1", "a-2", "b-1", "b-2"}
	sec := int64(1_700_000_000)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		r.add(sec+int64(i>>16), 32, 16, ids[i&3])
		i++
	}
}
