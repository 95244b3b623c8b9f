package scheduler_test

import (
	"math"
	"strings"
	"testing"

	"github.com/prefixroute/prefixroute/scheduler"
)

// laneSnap is one deployment of four instances with lane keys 1 to 4 and
// queues 0, 100, 120 and 140 ms (at 10,000 tokens/s, no attention term:
// a token's prefill is 0.1 ms), changed by f.
func laneSnap(f func(ins []scheduler.Instance)) *scheduler.Snapshot {
	snap := &scheduler.Snapshot{Deployments: deps(1)}
	for k, queue := range []float64{0, 100, 120, 140} {
		in := q(0, queue)
		in.ID = string(rune('a' + k))
		in.LaneKey = uint64(k + 1)
		snap.Instances = append(snap.Instances, in)
	}
	if f != nil {
		f(snap.Instances)
	}
	return snap
}

// TestShortLane: the lane instance (key 1, the idle one) refuses a prefill
// over short_lane_max_prefill_ms while another instance can take it; the
// softmax runs among the others.
func TestShortLane(t *testing.T) {
	soft := func(costs ...float64) []float64 { // softmax at delta 20 ms
		out, sum := make([]float64, len(costs)), 0.0
		for i, c := range costs {
			out[i] = math.Exp2(-(c - costs[0]) / 20)
			sum += out[i]
		}
		for i := range out {
			out[i] /= sum
		}
		return out
	}
	long, short := uint32(8000), uint32(1600) // 800 and 160 ms of prefill
	rest := soft(900, 920, 940)               // the long prompt on b, c, d
	lane := scheduler.ReasonShortLane
	tests := []struct {
		name     string
		lanes    uint32
		prompt   uint32
		target   float64
		snap     func(ins []scheduler.Instance)
		wantLane []bool
		wantWhy  []scheduler.Reason
		wantP    []float64 // nil: a takes part with the highest P
	}{
		{"off", 0, long, 0, nil, []bool{false, false, false, false}, make([]scheduler.Reason, 4), nil},
		{"long prompt", 1, long, 0, nil, []bool{true, false, false, false},
			[]scheduler.Reason{lane, 0, 0, 0}, []float64{0, rest[0], rest[1], rest[2]}},
		{"short prompt", 1, short, 0, nil, []bool{true, false, false, false}, make([]scheduler.Reason, 4), nil},
		{"long prompt cached on the lane", 1, long, 0, func(ins []scheduler.Instance) { ins[0].MatchedBlocks = 460 },
			[]bool{true, false, false, false}, make([]scheduler.Reason, 4), nil},
		{"the others draining: no lane", 1, long, 0, func(ins []scheduler.Instance) {
			ins[1].Draining, ins[2].Draining, ins[3].Draining = true, true, true
		}, []bool{false, false, false, false}, []scheduler.Reason{0, scheduler.ReasonDraining, scheduler.ReasonDraining, scheduler.ReasonDraining},
			[]float64{1, 0, 0, 0}},
		{"the others full: the lane takes it", 1, long, 0, func(ins []scheduler.Instance) {
			ins[1].KVUsage, ins[2].KVUsage, ins[3].KVUsage = 1, 1, 1
		}, []bool{true, false, false, false}, []scheduler.Reason{0, scheduler.ReasonKVFull, scheduler.ReasonKVFull, scheduler.ReasonKVFull},
			[]float64{1, 0, 0, 0}},
		{"only the lane meets the target", 1, long, 850, nil, []bool{true, false, false, false},
			[]scheduler.Reason{0, scheduler.ReasonSLOMiss, scheduler.ReasonSLOMiss, scheduler.ReasonSLOMiss}, []float64{1, 0, 0, 0}},
		{"the target met off the lane too", 1, long, 910, nil, []bool{true, false, false, false},
			[]scheduler.Reason{lane, 0, scheduler.ReasonSLOMiss, scheduler.ReasonSLOMiss}, []float64{0, 1, 0, 0}},
		{"eight lanes keep one instance out", 8, long, 0, nil, []bool{true, true, true, false},
			[]scheduler.Reason{lane, lane, lane, 0}, []float64{0, 0, 0, 1}},
		{"a draining instance leaves the lane to the next key", 1, long, 0, func(ins []scheduler.Instance) { ins[0].Draining = true },
			[]bool{false, true, false, false}, []scheduler.Reason{scheduler.ReasonDraining, lane, 0, 0}, []float64{0, 0, soft(920, 940)[0], soft(920, 940)[1]}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := sloPolicy(func(p *scheduler.Policy) { p.ShortLanes = tc.lanes })
			req := scheduler.Request{PromptTokens: tc.prompt, Blocks: int(tc.prompt / 16), TTFTTargetMs: tc.target}
			for _, chosen := range []bool{false, true} {
				req.ChosenOnly = chosen
				d := decide(t, p, req, laneSnap(tc.snap))
				for i, r := range d.Instances {
					if r.ShortLane != tc.wantLane[i] || r.Reason != tc.wantWhy[i] {
						t.Errorf("chosen-only %v: instance %d: lane %v, reason %q; want %v, %q", chosen, i, r.ShortLane, r.Reason,
							tc.wantLane[i], tc.wantWhy[i])
					}
					if tc.wantP != nil {
						near(t, "P of instance "+string(rune('a'+i)), r.Probability, tc.wantP[i], 1e-12)
					}
				}
				if tc.wantP == nil && d.Instance != 0 {
					t.Errorf("chosen-only %v: picked %d, want the idle lane instance a", chosen, d.Instance)
				}
				if got := d.Excluded[lane]; got != countReason(tc.wantWhy, lane) {
					t.Errorf("chosen-only %v: Excluded[short_lane] = %d", chosen, got)
				}
			}
		})
	}
}

func countReason(rs []scheduler.Reason, r scheduler.Reason) int {
	n := 0
	for _, x := range rs {
		if x == r {
			n++
		}
	}
	return n
}

// TestLaneKey: the key is the id's, the same on every call and replica
// (exact values), and spreads ids apart.
func TestLaneKey(t *testing.T) {
	if a, b := scheduler.LaneKey("main-00"), scheduler.LaneKey("main-00"); a != b {
		t.Fatalf("LaneKey not stable: %#x, %#x", a, b)
	}
	seen := map[uint64]string{}
	for _, id := range []string{"", "a", "b", "main-00", "main-01", "main-10", "10.0.0.1:8000"} {
		k := scheduler.LaneKey(id)
		if other, dup := seen[k]; dup {
			t.Errorf("LaneKey(%q) = LaneKey(%q) = %#x", id, other, k)
		}
		seen[k] = id
	}
}

// TestShortLanePolicy: the two fields' ranges, with their proto names.
func TestShortLanePolicy(t *testing.T) {
	for _, tc := range []struct {
		f    func(*scheduler.Policy)
		want string
	}{
		{func(p *scheduler.Policy) { p.ShortLanes = 9 }, "short_lanes must be in [0, 8] instances, got 9"},
		{func(p *scheduler.Policy) { p.ShortLaneMaxPrefillMs = 0 }, "short_lane_max_prefill_ms must be in [1, 1000000] ms, got 0"},
		{func(p *scheduler.Policy) { p.ShortLaneMaxPrefillMs = math.NaN() }, "short_lane_max_prefill_ms must be in [1, 1000000] ms, got NaN"},
	} {
		err := policy(tc.f).Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate() = %v, want %q", err, tc.want)
		}
	}
	if err := policy(func(p *scheduler.Policy) { p.ShortLanes, p.ShortLaneMaxPrefillMs = 8, 1 }).Validate(); err != nil {
		t.Errorf("the bounds: %v", err)
	}
}
