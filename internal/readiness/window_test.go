package readiness_test

import (
	"testing"
	"time"

	"github.com/prefixroute/prefixroute/internal/readiness"
)

// onA is a pick on deployment A's only instance at d after t0, prompt 10
// tokens, no blocks.
func onA(d time.Duration) pick {
	return pick{at: d, prompt: 10, instance: 0, depMatch: []int{0, 0}, uncached: 10, ms: 1}
}

var twoDeps = pool{deps: []string{"A", "B"}, insts: []inst{{0, 16, 1000}, {1, 16, 1000}}}

func twoLive() *fakeLive {
	return &fakeLive{deps: []readiness.LiveDeployment{
		{Name: "A", Weight: 1, Instances: 1, PrefillTokensPerSecond: 1000},
		{Name: "B", Weight: 1, Instances: 1, PrefillTokensPerSecond: 1000}}}
}

func TestWindowSliding(t *testing.T) {
	// A 1-minute window of six 10 s buckets; bucket k covers
	// [t0+10k s, t0+10(k+1) s).
	s := time.Second
	tests := []struct {
		name    string
		picks   []time.Duration
		now     time.Duration
		picks0  uint64        // pool picks in the window
		covered time.Duration // Status.Covered
		late    uint64
	}{
		{"empty tracker", nil, 30 * s, 0, 0, 0},
		{"younger than the window: covered from the first pick", []time.Duration{1 * s}, 30 * s, 1, 29 * s, 0},
		{"status before the first pick", []time.Duration{10 * s}, 5 * s, 0, 0, 0},
		// At t0+59.999s the window is buckets 0..5 (from t0).
		{"last instant of the first bucket's window", []time.Duration{1 * s, 15 * s}, 60*s - time.Millisecond, 2, 59*s - time.Millisecond, 0},
		// At t0+60s it is buckets 1..6, from t0+10s: the t0+1s pick is out.
		{"first bucket leaves at its boundary", []time.Duration{1 * s, 15 * s}, 60 * s, 1, 50 * s, 0},
		{"old enough: covered is 5 buckets + the current part", []time.Duration{1 * s, 15 * s}, 65 * s, 1, 55 * s, 0},
		{"everything out", []time.Duration{1 * s, 15 * s}, 70 * s, 0, 60*s - 10*s, 0},
		{"a pick on a boundary counts in the later bucket", []time.Duration{10 * s}, 69*s + 999*time.Millisecond, 1, 59*s + 999*time.Millisecond, 0},
		// At t0+70s the window starts at t0+20s.
		{"a pick on a boundary, that bucket leaves", []time.Duration{10 * s}, 70 * s, 0, 50 * s, 0},
		// Head at t0+200s (bucket 20): bucket 10 (t0+100s) is older than
		// the ring; bucket 19 (t0+195s) is inside.
		{"late record dropped, recent one kept", []time.Duration{1 * s, 200 * s, 100 * s, 195 * s}, 200 * s, 2, 50 * s, 1},
		{"a gap longer than the window clears the ring", []time.Duration{1 * s, 2 * s, 500 * s}, 500 * s, 1, 50 * s, 0},
		{"clock back inside the ring", []time.Duration{30 * s, 5 * s}, 30 * s, 2, 25 * s, 0},
		{"status in the past of the head", []time.Duration{5 * s, 45 * s}, 30 * s, 1, 25 * s, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := readiness.New(readiness.Config{Window: time.Minute, Buckets: 6})
			for _, d := range tt.picks {
				snap, dec := twoDeps.build(onA(d))
				tr.Record(at(d), nil, 10, snap, dec)
			}
			st, err := tr.Status(at(tt.now), readiness.Query{From: "A", To: "B"}, twoLive())
			if err != nil {
				t.Fatal(err)
			}
			if st.Picks != tt.picks0 || st.Covered != tt.covered || st.LateRecords != tt.late {
				t.Errorf("picks %d covered %v late %d, want %d %v %d", st.Picks, st.Covered, st.LateRecords,
					tt.picks0, tt.covered, tt.late)
			}
			a := st.Deployments[0]
			if a.Picks != tt.picks0 || a.PrefillTokens != 10*tt.picks0 {
				t.Errorf("A: picks %d prefill %d, want %d %d", a.Picks, a.PrefillTokens, tt.picks0, 10*tt.picks0)
			}
			if secs := tt.covered.Seconds(); secs > 0 && a.PrefillMsPerSec != float64(tt.picks0)/secs {
				t.Errorf("A: prefill ms/s %v, want %v", a.PrefillMsPerSec, float64(tt.picks0)/secs)
			}
			checkFinite(t, st)
		})
	}
}

// TestWindowSketchSlides checks the distinct-block count forgets the blocks
// of buckets that leave the window (with the recompute horizon the whole
// window) or the horizon (the default quarter, two 10 s buckets).
func TestWindowSketchSlides(t *testing.T) {
	tr := readiness.New(readiness.Config{Window: time.Minute, Buckets: 6, RecomputeHorizon: time.Minute})
	short := readiness.New(readiness.Config{Window: time.Minute, Buckets: 6})
	hs1, hs2 := chain(10, 20), chain(11, 5)
	for _, p := range []pick{
		{at: time.Second, hashes: hs1, prompt: 320, depMatch: []int{20, 0}, matched: 20},
		{at: 35 * time.Second, hashes: hs2, prompt: 80, depMatch: []int{5, 1}, matched: 5},
	} {
		snap, d := twoDeps.build(p)
		tr.Record(at(p.at), p.hashes, p.prompt, snap, d)
		short.Record(at(p.at), p.hashes, p.prompt, snap, d)
	}
	for _, c := range []struct {
		now             time.Duration
		distinct, short uint64
	}{
		// Both picks: blocks 0..19 of hs1, 1..4 of hs2; the horizon
		// [t0+30s, t0+50s) has the second only.
		{40 * time.Second, 20 + 4, 4},
		{49 * time.Second, 20 + 4, 4},
		{50 * time.Second, 20 + 4, 0}, // the horizon is now [t0+40s, t0+60s)
		{60 * time.Second, 4, 0},      // bucket 0 (t0+1s) left at t0+60s
		{89 * time.Second, 4, 0},      // bucket 3 (t0+35s) is the oldest
		{90 * time.Second, 0, 0},      // and leaves at t0+90s
	} {
		for _, x := range []struct {
			tr   *readiness.Tracker
			want uint64
		}{{tr, c.distinct}, {short, c.short}} {
			st, err := x.tr.Status(at(c.now), readiness.Query{From: "A", To: "B"}, twoLive())
			if err != nil {
				t.Fatal(err)
			}
			if st.Migration.DistinctBlocks != x.want {
				t.Errorf("at +%v (horizon %v): distinct %d, want %d", c.now, x.tr.Config().RecomputeHorizon,
					st.Migration.DistinctBlocks, x.want)
			}
		}
	}
}
