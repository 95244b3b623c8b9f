package readiness_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prefixroute/prefixroute/internal/readiness"
	"github.com/prefixroute/prefixroute/scheduler"
)

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  readiness.Config
		msg  string // "" = valid
	}{
		{"zero value is the defaults", readiness.Config{}, ""},
		{"one bucket", readiness.Config{Window: time.Second, Buckets: 1}, ""},
		{"negative window", readiness.Config{Window: -time.Second}, "window must be > 0 (0 means 5m0s), got -1s"},
		{"negative buckets", readiness.Config{Buckets: -1}, "buckets must be in [1, 3600] (0 means 60), got -1"},
		{"too many buckets", readiness.Config{Buckets: 3601, Window: time.Hour}, "buckets must be in [1, 3600] (0 means 60), got 3601"},
		{"window not a whole number of buckets", readiness.Config{Window: time.Minute, Buckets: 7},
			"window 1m0s is not a whole number of 7 buckets (3ns remain)"},
		{"buckets under 1ms", readiness.Config{Window: 60 * time.Millisecond, Buckets: 120}, "window/buckets must be >= 1ms, got 500µs"},
		{"hot prefixes", readiness.Config{HotPrefixes: 1 << 17}, "hot_prefixes must be in [1, 65536] (0 means 256), got 131072"},
		{"max hot blocks", readiness.Config{MaxHotBlocks: -3}, "max_hot_blocks must be in [1, 65536] (0 means 1024), got -3"},
		{"max deployments", readiness.Config{MaxDeployments: 65}, "max_deployments must be in [1, 64] (0 means 8), got 65"},
		{"sketch precision", readiness.Config{SketchPrecision: 17}, "sketch_precision must be in [4, 16] (0 means 12), got 17"},
		{"sketch precision low", readiness.Config{SketchPrecision: 3}, "sketch_precision must be in [4, 16] (0 means 12), got 3"},
		{"recompute horizon the whole window", readiness.Config{Window: time.Minute, RecomputeHorizon: time.Minute}, ""},
		{"recompute horizon over the window", readiness.Config{Window: time.Minute, RecomputeHorizon: time.Minute + 1},
			"recompute_horizon must be in [0, window 1m0s] (0 means window/4), got 1m0.000000001s"},
		{"negative recompute horizon", readiness.Config{RecomputeHorizon: -time.Second},
			"recompute_horizon must be in [0, window 5m0s] (0 means window/4), got -1s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if tt.msg == "" {
				if err != nil {
					t.Fatal(err)
				}
				_ = readiness.New(tt.cfg)
				return
			}
			if !errors.Is(err, readiness.ErrInvalidConfig) || err.Error() != "readiness: invalid config: "+tt.msg {
				t.Fatalf("err = %v, want %q", err, tt.msg)
			}
			defer func() {
				if r := recover(); r == nil {
					t.Error("New did not panic")
				}
			}()
			readiness.New(tt.cfg)
		})
	}
	got := readiness.New(readiness.Config{}).Config()
	want := readiness.Config{Window: 5 * time.Minute, Buckets: 60, HotPrefixes: 256, MaxHotBlocks: 1024,
		MaxDeployments: 8, BlockSizeTokens: 16, SketchPrecision: 12, RecomputeHorizon: 75 * time.Second}
	if got != want {
		t.Errorf("defaults %+v, want %+v", got, want)
	}
}

func TestStatusErrors(t *testing.T) {
	tr := readiness.New(readiness.Config{})
	record(tr, scriptedPool, scriptedPicks)
	tests := []struct {
		name string
		q    readiness.Query
		live readiness.Live
		err  error
		msg  string
	}{
		{"empty from", readiness.Query{To: "B"}, scriptedLive(), readiness.ErrInvalidQuery, "from is empty"},
		{"empty to", readiness.Query{From: "A"}, scriptedLive(), readiness.ErrInvalidQuery, "to is empty"},
		{"same", readiness.Query{From: "A", To: "A"}, scriptedLive(), readiness.ErrSameDeployment, `"A"`},
		{"negative top k", readiness.Query{From: "A", To: "B", TopK: -1}, scriptedLive(), readiness.ErrInvalidQuery, "top_k must be in [0, 100] (0 means 10), got -1"},
		{"top k too big", readiness.Query{From: "A", To: "B", TopK: 101}, scriptedLive(), readiness.ErrInvalidQuery, "got 101"},
		{"nil live", readiness.Query{From: "A", To: "B"}, nil, readiness.ErrInvalidQuery, "nil Live"},
		{"unknown from", readiness.Query{From: "X", To: "B"}, scriptedLive(), readiness.ErrUnknownDeployment, `"X"`},
		{"unknown to", readiness.Query{From: "A", To: "Y"}, scriptedLive(), readiness.ErrUnknownDeployment, `"Y"`},
		// B is not live but a pick in the window named it: known.
		{"tracked, not live", readiness.Query{From: "A", To: "B"}, &fakeLive{deps: scriptedLive().deps[:1]}, nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, err := tr.Status(at(30*time.Second), tt.q, tt.live)
			if tt.err == nil {
				if err != nil {
					t.Fatal(err)
				}
				checkFinite(t, st)
				return
			}
			if !errors.Is(err, tt.err) || !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("err = %v, want %v containing %q", err, tt.err, tt.msg)
			}
		})
	}
	// Once the window has passed, B (not live) is unknown.
	_, err := tr.Status(at(time.Hour), readiness.Query{From: "A", To: "B"}, &fakeLive{deps: scriptedLive().deps[:1]})
	if !errors.Is(err, readiness.ErrUnknownDeployment) {
		t.Errorf("after the window: err = %v", err)
	}
}

func TestMaxDeployments(t *testing.T) {
	// Two tracked slots; C is the third deployment of the snapshot.
	pl := pool{deps: []string{"A", "B", "C"}, insts: []inst{{0, 16, 1000}, {1, 16, 1000}, {2, 16, 1000}}}
	live := &fakeLive{deps: []readiness.LiveDeployment{
		{Name: "A", Weight: 1, Instances: 1, PrefillTokensPerSecond: 1000},
		{Name: "B", Weight: 1, Instances: 1, PrefillTokensPerSecond: 1000},
		{Name: "C", Weight: 1, Instances: 1, PrefillTokensPerSecond: 1000}}}
	tr := readiness.New(readiness.Config{Window: time.Minute, Buckets: 6, MaxDeployments: 2})
	hs := chain(5, 4)
	for i, inst := range []int{0, 1, 2, 2} {
		record(tr, pl, []pick{{at: time.Duration(i) * time.Second, hashes: hs, prompt: 64, instance: inst,
			depMatch: []int{4, 0, 2}, uncached: 64}})
	}
	st, err := tr.Status(at(10*time.Second), readiness.Query{From: "A", To: "C"}, live)
	if err != nil {
		t.Fatal(err)
	}
	if st.Picks != 4 || st.UntrackedPicks != 2 || st.PromptTokens != 256 {
		t.Errorf("picks %d untracked %d prompt %d, want 4 2 256", st.Picks, st.UntrackedPicks, st.PromptTokens)
	}
	c := st.Deployments[2]
	if c.Name != "C" || c.Tracked || c.Picks != 0 || !c.Live {
		t.Errorf("C: %+v", c)
	}
	if st.Migration.Tracked || st.Migration.CachedRequests != 0 {
		t.Errorf("A→C migration: %+v", st.Migration)
	}
	// A is named by no pick for a whole window: C takes its slot.
	pl2 := pool{deps: []string{"B", "C"}, insts: []inst{{0, 16, 1000}, {1, 16, 1000}}}
	for _, d := range []time.Duration{70 * time.Second, 71 * time.Second} {
		record(tr, pl2, []pick{{at: d, hashes: hs, prompt: 64, instance: 1, depMatch: []int{1, 3}, uncached: 32}})
	}
	st, err = tr.Status(at(75*time.Second), readiness.Query{From: "C", To: "B"}, live)
	if err != nil {
		t.Fatal(err)
	}
	// C's picks: B has 1 of the 4 blocks, so the sketch holds hs[1:], 3.
	if st.UntrackedPicks != 0 || st.Picks != 2 || !st.Migration.Tracked || st.Migration.CachedRequests != 2 ||
		st.Migration.DistinctBlocks != 3 {
		t.Errorf("after recycling: %+v", st)
	}
}

func TestZeroThroughputAndEmpty(t *testing.T) {
	live := &fakeLive{deps: []readiness.LiveDeployment{
		{Name: "A", Weight: 0, Instances: 1, PrefillTokensPerSecond: 1000},
		{Name: "B", Weight: 0, Instances: 0, PrefillTokensPerSecond: 0}}}
	empty := readiness.New(readiness.Config{})
	st, err := empty.Status(t0, readiness.Query{From: "A", To: "B"}, live)
	if err != nil {
		t.Fatal(err)
	}
	checkFinite(t, st)
	m := st.Migration
	// Every other weight is 0: f = 1 by definition. B has no instance and
	// no throughput: capacity 0, extra ms and headroom unknown.
	if st.Covered != 0 || st.Picks != 0 || m.ToFraction != 1 || m.ExtraPrefillMsKnown || m.HeadroomKnown ||
		m.CanAbsorb || m.ToCapacityMsPerSec != 0 || len(st.Deployments) != 2 {
		t.Errorf("empty tracker: %+v", st)
	}

	tr := readiness.New(readiness.Config{})
	record(tr, scriptedPool, scriptedPicks)
	live.deps[1].Instances = 3 // B has instances but reports no throughput
	st, err = tr.Status(at(30*time.Second), readiness.Query{From: "A", To: "B"}, live)
	if err != nil {
		t.Fatal(err)
	}
	checkFinite(t, st)
	m = st.Migration
	if m.ExtraTokensPerSec <= 0 || m.ExtraPrefillMsKnown || m.ExtraPrefillMsPerSec != 0 || m.HeadroomKnown ||
		m.ToCapacityMsPerSec != 3000 || m.CanAbsorb {
		t.Errorf("zero throughput: %+v", m)
	}
}

func TestRecordIgnoresBadInput(t *testing.T) {
	tr := readiness.New(readiness.Config{})
	snap, d := twoDeps.build(onA(0))
	bad := []struct {
		name string
		snap *scheduler.Snapshot
		d    *scheduler.Decision
	}{
		{"nil snapshot", nil, d},
		{"nil decision", snap, nil},
		{"failed decide", snap, &scheduler.Decision{Deployment: -1, Instance: -1}},
		{"instance out of range", snap, &scheduler.Decision{Deployment: 0, Instance: 5, Deployments: d.Deployments, Instances: d.Instances}},
		{"short audit", snap, &scheduler.Decision{Deployment: 1, Instance: 1, Deployments: d.Deployments[:1], Instances: d.Instances}},
	}
	for _, b := range bad {
		tr.Record(t0, nil, 10, b.snap, b.d)
	}
	st, err := tr.Status(t0, readiness.Query{From: "A", To: "B"}, twoLive())
	if err != nil {
		t.Fatal(err)
	}
	if st.Picks != 0 {
		t.Errorf("bad input recorded %d picks", st.Picks)
	}
}
