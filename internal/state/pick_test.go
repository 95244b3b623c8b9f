package state

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/prefixroute/prefixroute/scheduler"
)

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-12 }

// TestPickSpreadsBetweenReports: with four equal instances and 200 picks at
// the same instant (no report in between), optimistic accounting spreads the
// picks; the assigned work is exactly the uncached tokens picked, and a
// report resets it.
func TestPickSpreadsBetweenReports(t *testing.T) {
	_, p := newTestPool(t, Limits{})
	ids := []string{"a", "b", "c", "d"}
	sessions := map[string]*Session{}
	for _, id := range ids {
		sessions[id] = connect(t, p, t0, "dep", id, &Report{})
	}
	rng := rand.New(rand.NewPCG(2026, 1))
	var pk Pick
	counts := map[string]int{}
	assigned := map[string]uint64{}
	total := uint64(0)
	for i := range 200 {
		// Distinct cold prefixes, so only the load differs.
		in := &PickInput{Hashes: []uint64{uint64(i)<<8 | 1, uint64(i)<<8 | 2}, PromptTokens: 1000}
		if err := p.Pick(t0, in, rng, &pk); err != nil {
			t.Fatal(err)
		}
		id := pk.Snapshot.Instances[pk.Decision.Instance].ID
		// The snapshot shows the work assigned so far.
		for j, si := range pk.Snapshot.Instances {
			if si.AssignedTokens != assigned[si.ID] {
				t.Fatalf("pick %d: snapshot AssignedTokens[%s] = %d, want %d", i, si.ID, si.AssignedTokens, assigned[si.ID])
			}
			if si.MatchedBlocks != 0 {
				t.Fatalf("pick %d: instance %d matched %d of a cold prefix", i, j, si.MatchedBlocks)
			}
		}
		u := uint64(pk.Decision.Instances[pk.Decision.Instance].WorkTokens) // 1000·(1 + 500/17000) = 1029
		counts[id]++
		assigned[id] += u
		total += u
	}
	// Exact distribution for this seed; each instance's extra 1000 tokens
	// cost 100 ms = 5 deltas, so the picks stay almost round-robin.
	want := map[string]int{"a": 50, "b": 50, "c": 50, "d": 50}
	if !reflect.DeepEqual(counts, want) {
		t.Errorf("distribution %v, want %v", counts, want)
	}
	for _, id := range ids {
		if counts[id] < 20 {
			t.Errorf("instance %s got %d of 200 picks", id, counts[id])
		}
	}
	if total != 200*1029 {
		t.Fatalf("work total %d, want 200 × 1029", total)
	}
	sum := uint64(0)
	for _, st := range p.Instances(t0) {
		if st.AssignedTokens != assigned[st.Instance] {
			t.Errorf("%s: AssignedTokens %d, want %d", st.Instance, st.AssignedTokens, assigned[st.Instance])
		}
		sum += st.AssignedTokens
	}
	if sum != total {
		t.Errorf("AssignedTokens sum %d, want %d", sum, total)
	}
	// A report accounts for the assigned work: reset to 0, others unchanged.
	mustReport(t, sessions["b"], t0.Add(time.Millisecond), &Report{QueuedPrefillTokens: 123})
	for _, st := range p.Instances(t0) {
		want := assigned[st.Instance]
		if st.Instance == "b" {
			want = 0
		}
		if st.AssignedTokens != want {
			t.Errorf("after b's report: %s AssignedTokens %d, want %d", st.Instance, st.AssignedTokens, want)
		}
	}
	mustInvariants(t, p)
}

// TestPickErrors: an empty pool and a pool of stale instances.
func TestPickErrors(t *testing.T) {
	_, p := newTestPool(t, Limits{})
	var pk Pick
	rng := rand.New(rand.NewPCG(1, 1))
	if err := p.Pick(t0, &PickInput{}, rng, &pk); !errors.Is(err, scheduler.ErrNoInstances) {
		t.Fatalf("empty pool: %v", err)
	}
	connect(t, p, t0, "d", "a", nil)
	if err := p.Pick(t0.Add(3*time.Second), &PickInput{}, rng, &pk); !errors.Is(err, scheduler.ErrNoEligibleInstance) ||
		pk.Decision.Excluded[scheduler.ReasonStale] != 1 {
		t.Fatalf("stale pool: %v %v", err, pk.Decision.Excluded)
	}
	if pk.Snapshot.Instances[0].ReportAge != 3*time.Second {
		t.Fatalf("report age %v", pk.Snapshot.Instances[0].ReportAge)
	}
}

// TestPickReuseAcrossPools: one Pick serves pools of different sizes.
func TestPickReuseAcrossPools(t *testing.T) {
	_, big := newTestPool(t, Limits{})
	for i := range 300 {
		connect(t, big, t0, "d", fmt.Sprint("i", i), &Report{ReportsCacheEvents: true, Stored: []uint64{1}})
	}
	_, small := newTestPool(t, Limits{})
	connect(t, small, t0, "d", "x", &Report{ReportsCacheEvents: true, Stored: []uint64{2}})
	connect(t, small, t0, "d", "y", &Report{ReportsCacheEvents: true, Stored: []uint64{1}})
	var pk Pick
	pickOnce(t, big, t0, &PickInput{Hashes: []uint64{1}, PromptTokens: 16}, 1, &pk)
	if len(pk.Snapshot.Instances) != 300 || pk.Snapshot.Instances[299].MatchedBlocks != 1 {
		t.Fatal("big pool snapshot wrong")
	}
	pickOnce(t, small, t0, &PickInput{Hashes: []uint64{1}, PromptTokens: 16}, 1, &pk)
	if len(pk.Snapshot.Instances) != 2 || len(pk.Addresses) != 2 || len(pk.Snapshot.Deployments) != 1 ||
		pk.Snapshot.Instances[0].MatchedBlocks != 0 || pk.Snapshot.Instances[1].MatchedBlocks != 1 {
		t.Fatalf("small pool snapshot after big: %+v", pk.Snapshot)
	}
}

// TestPickDoesNotAllocate: with a reused Pick, a pick on a warm pool
// allocates nothing, with the full audit or the chosen deployment's.
func TestPickDoesNotAllocate(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("allocation counts are not meaningful under -race")
	}
	_, p := newTestPool(t, Limits{})
	for i := range 100 {
		connect(t, p, t0, fmt.Sprint("d", i%4), fmt.Sprint("i", i), &Report{ReportsCacheEvents: i%2 == 0, Stored: []uint64{1, 2}})
	}
	for _, chosenOnly := range []bool{false, true} {
		in := &PickInput{Hashes: []uint64{1, 2, 3}, PromptTokens: 48, ChosenOnly: chosenOnly}
		var pk Pick
		rng := rand.New(rand.NewPCG(1, 2))
		pickOnce(t, p, t0, in, 1, &pk)
		allocs := testing.AllocsPerRun(200, func() {
			if err := p.Pick(t0, in, rng, &pk); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 0 {
			t.Errorf("Pick (ChosenOnly %v) allocates %v times per call", chosenOnly, allocs)
		}
	}
}

// TestPickReportAge: the snapshot's ReportAge is max(0, now.Sub(last report))
// exactly, whatever the clocks: monotonic readings (as in the daemon) or
// none (virtual time), both mixed, reports far from the first one, and an
// instance that has not reported yet.
func TestPickReportAge(t *testing.T) {
	wall := t0
	mono := time.Now()
	tests := []struct {
		name    string
		reports []time.Time // one instance each; the first sets the epoch
		nows    []time.Time
	}{
		{"wall clock", []time.Time{wall, wall.Add(-time.Second), wall.Add(time.Hour)},
			[]time.Time{wall, wall.Add(1500 * time.Millisecond), wall.Add(-time.Minute), wall.Add(2 * time.Hour)}},
		{"monotonic clock", []time.Time{mono, mono.Add(-time.Second), mono.Add(time.Millisecond)},
			[]time.Time{mono, mono.Add(time.Second), mono.Add(-time.Hour)}},
		{"mixed", []time.Time{mono, mono.Round(0).Add(time.Second), wall},
			[]time.Time{mono.Add(time.Second), mono.Round(0).Add(3 * time.Second), wall.Add(time.Second)}},
		{"centuries apart", []time.Time{wall, wall.AddDate(-200, 0, 0), wall.AddDate(250, 0, 0), {}},
			[]time.Time{wall, wall.AddDate(200, 0, 0), wall.AddDate(-200, 0, 0), {}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, p := newTestPool(t, Limits{})
			last := map[string]time.Time{}
			for i, at := range tc.reports {
				id := fmt.Sprint("i", i)
				connect(t, p, at, "d", id, &Report{ReportsCacheEvents: true})
				last[id] = at
			}
			// One more instance connected but never reported.
			if _, err := p.Connect(wall, Identity{Pool: "p", Deployment: "d", Instance: "silent", Address: "s"}); err != nil {
				t.Fatal(err)
			}
			mustInvariants(t, p)
			var pk Pick
			for _, now := range tc.nows {
				p.snapshot(now, &PickInput{}, &pk)
				for _, si := range pk.Snapshot.Instances {
					want := max(0, now.Sub(last[si.ID])) // zero time for "silent"
					if si.ReportAge != want {
						t.Errorf("now %v: %s age %v, want %v", now, si.ID, si.ReportAge, want)
					}
				}
			}
		})
	}
}
