package readiness_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/prefixroute/prefixroute/internal/readiness"
)

// scripted is a two-deployment pool (A old, B new; block size 16; A's
// instances prefill 10 tokens/ms, B's 20) and six picks with known depths,
// in a 1-minute window of six 10 s buckets starting at t0.
var (
	chP, chQ, chR, chS = chain(1, 8), chain(2, 10), chain(3, 12), chain(4, 3)
	scriptedPool       = pool{deps: []string{"A", "B"}, insts: []inst{
		{0, 16, 10000}, {0, 16, 10000}, {1, 16, 20000}, {1, 16, 20000}}}
	scriptedPicks = []pick{
		// The A→B sketch takes hashes[m_B:] of every pick on A.
		// 1: P cached whole on a0 and nowhere on B. hit 8·16 = 128,
		// sketch A→B += p0..p7 (8).
		{at: 1 * time.Second, hashes: chP, prompt: 128, instance: 0, depMatch: []int{8, 0}, matched: 8},
		// 2: P[:6] on a1 (4 cached there; a0 has 6), B has 2. hit 64,
		// uncached 100 − 64 = 36, 3.6 ms at 10 tokens/ms, sketch
		// p2..p5, already in it.
		{at: 2 * time.Second, hashes: chP[:6], prompt: 100, instance: 1, depMatch: []int{6, 2}, matched: 4, uncached: 36, ms: 3.6},
		// 3: Q[:4] on b0, cold there, A has 4: a pick on B (the B→A
		// sketch: A holds all 4, nothing), uncached 64, 3.2 ms.
		{at: 12 * time.Second, hashes: chQ[:4], prompt: 64, instance: 2, depMatch: []int{4, 0}, uncached: 64, ms: 3.2},
		// 4: R cached on both (12): hit 192, uncached 8, 0.8 ms, B
		// holds every block: sketch nothing.
		{at: 13 * time.Second, hashes: chR, prompt: 200, instance: 0, depMatch: []int{12, 12}, matched: 12, uncached: 8, ms: 0.8},
		// 5: S cold everywhere: uncached 48, 4.8 ms, sketch s0..s2 (3,
		// the blocks A prefills and then holds).
		{at: 25 * time.Second, hashes: chS, prompt: 48, instance: 1, depMatch: []int{0, 0}, uncached: 48, ms: 4.8},
		// 6: Q (10 blocks) on a0, B has 3: hit 160, sketch q3..q9 (7).
		{at: 26 * time.Second, hashes: chQ, prompt: 160, instance: 0, depMatch: []int{10, 3}, matched: 10},
	}
)

// scriptedLive has A weight 1 (2 instances, 20000 tokens/s), B weight 9
// (2 instances, 40000 tokens/s) and C weight 3 (1 instance, no throughput,
// no picks); A caches P, Q and R, B caches Q[:3] and R.
func scriptedLive() *fakeLive {
	l := &fakeLive{deps: []readiness.LiveDeployment{
		{Name: "A", Weight: 1, Instances: 2, PrefillTokensPerSecond: 20000},
		{Name: "B", Weight: 9, Instances: 2, PrefillTokensPerSecond: 40000},
		{Name: "C", Weight: 3, Instances: 1},
	}}
	l.cache("A", chP)
	l.cache("A", chQ)
	l.cache("A", chR)
	l.cache("B", chQ[:3])
	l.cache("B", chR)
	return l
}

func record(tr *readiness.Tracker, pl pool, picks []pick) {
	for _, pk := range picks {
		snap, d := pl.build(pk)
		tr.Record(at(pk.at), pk.hashes, pk.prompt, snap, d)
	}
}

func TestStatusScripted(t *testing.T) {
	// Status at t0+30s: the first pick was at t0+1s, the window (six 10 s
	// buckets, the oldest starting at t0−20s) is older, so Covered = 29 s.
	// Variables, not constants, so that the expected figures round like
	// the tracker's float64 arithmetic (constant expressions are exact).
	secs := 29.0
	ms1, ms2, ms3 := 3.6, 0.8, 4.8
	msA := ms1 + ms2 + ms3 // per-bucket sums 3.6, 0.8, 4.8, in bucket order
	// Pool: 6 picks, 128+100+64+200+48+160 = 700 prompt tokens.
	// A: picks 1,2,4,5,6: prompt 128+100+200+48+160 = 636, hit
	// 128+64+192+0+160 = 544, prefill 0+36+8+48+0 = 92 tokens,
	// 3.6+0.8+4.8 = 9.2 ms. B: pick 3: prompt 64, hit 0, prefill 64, 3.2 ms.
	// Weights 1+9+3 = 13.
	depA := readiness.DeploymentStatus{Name: "A", Live: true, Tracked: true, Weight: 1, WeightShare: 1.0 / 13,
		Instances: 2, ThroughputTokensPerSec: 20000, Picks: 5, TrafficShare: 5.0 / 6,
		PromptTokens: 636, HitTokens: 544, HitRatio: 544.0 / 636, PrefillTokens: 92, PrefillTokensPerSec: 92 / secs,
		PrefillMs: msA, PrefillMsPerSec: msA / secs}
	depB := readiness.DeploymentStatus{Name: "B", Live: true, Tracked: true, Weight: 9, WeightShare: 9.0 / 13,
		Instances: 2, ThroughputTokensPerSec: 40000, Picks: 1, TrafficShare: 1.0 / 6,
		PromptTokens: 64, PrefillTokens: 64, PrefillTokensPerSec: 64 / secs, PrefillMs: 3.2, PrefillMsPerSec: 3.2 / secs}
	depC := readiness.DeploymentStatus{Name: "C", Live: true, Weight: 3, WeightShare: 3.0 / 13, Instances: 1}
	base := readiness.Status{Now: at(30 * time.Second), Window: time.Minute, Covered: 29 * time.Second,
		Picks: 6, PromptTokens: 700, Deployments: []readiness.DeploymentStatus{depA, depB, depC}}

	// A→B: cached on A only: picks 1, 2, 6 (3 of 6 = 0.5), prompt
	// 128+100+160 = 388 of 700. f = w_B/(w_B+w_C) = 9/12 = 0.75. Moved
	// = A's prefill, 92 tokens. The recompute horizon, 60/4 = 15 s,
	// rounds up to 2 buckets: [t0+20s, t0+40s), so it covers 10 s and
	// picks 5 and 6: distinct blocks 3+7 = 10 (exact at this size),
	// recompute 0.75·10·16 = 120 tokens. B prefills 40000/2/1000 = 20
	// tokens/ms per instance; capacity 2·1000 ms/s.
	movedRate := 0.75 * (92 / secs)
	extra := movedRate + 120/secs
	ab := base
	ab.Migration = readiness.Migration{From: "A", To: "B", Tracked: true,
		CachedRequests: 3, CachedRequestShare: 0.5, CachedPromptTokens: 388, CachedPromptShare: 388.0 / 700,
		ToFraction: 0.75, MovedPrefillTokens: 92, MovedPrefillTokensPerSec: movedRate,
		RecomputeHorizon: 10 * time.Second, DistinctBlocks: 10, RecomputeTokens: 120, RecomputeTokensPerSec: 120 / secs,
		ExtraTokensPerSec: extra, ToTokensPerMs: 20, ExtraPrefillMsPerSec: extra / 20, ExtraPrefillMsKnown: true,
		ToPrefillMsPerSec: 3.2 / secs, ToCapacityMsPerSec: 2000,
		HeadroomPct:   100 * (1 - (3.2/secs+extra/20)/2000),
		HeadroomKnown: true, CanAbsorb: true}
	// Hot: P (picks 1, 2; depth A 8, B 0; extra 8·16 = 128; last prompt
	// 100) and Q (picks 3, 6; A 10, B 3; extra 7·16 = 112; last prompt
	// 160) tie at 2 requests and sort by first hash; R is as deep on B, S
	// cached nowhere.
	hotP := readiness.HotPrefix{FirstBlockHash: chP[0], Blocks: 8, DepthFrom: 8, Requests: 2, PromptTokens: 100, ExtraTokens: 128}
	hotQ := readiness.HotPrefix{FirstBlockHash: chQ[0], Blocks: 10, DepthFrom: 10, DepthTo: 3, Requests: 2, PromptTokens: 160, ExtraTokens: 112}
	ab.HotPrefixes = []readiness.HotPrefix{hotP, hotQ}
	if chQ[0] < chP[0] {
		ab.HotPrefixes = []readiness.HotPrefix{hotQ, hotP}
	}
	abTop1 := ab
	abTop1.HotPrefixes = ab.HotPrefixes[:1]

	// B→A: no pick on B is cached deeper on B, and pick 3, B's only one,
	// is outside the horizon (its blocks A holds anyway); moved = B's
	// prefill, 64 tokens; f = 1/(1+3) = 0.25. A prefills 20000/2/1000 =
	// 10 tokens/ms; its load 9.2 ms over 29 s.
	baMoved := 0.25 * (64 / secs)
	ba := base
	ba.Migration = readiness.Migration{From: "B", To: "A", Tracked: true, ToFraction: 0.25,
		MovedPrefillTokens: 64, MovedPrefillTokensPerSec: baMoved, RecomputeHorizon: 10 * time.Second,
		ExtraTokensPerSec: baMoved, ToTokensPerMs: 10, ExtraPrefillMsPerSec: baMoved / 10, ExtraPrefillMsKnown: true,
		ToPrefillMsPerSec: msA / secs, ToCapacityMsPerSec: 2000,
		HeadroomPct: 100 * (1 - (msA/secs+baMoved/10)/2000), HeadroomKnown: true, CanAbsorb: true}

	// A→C: C was never in a snapshot, so there are no pair figures
	// (Tracked false: moved and recompute 0); f = 3/12; C reports no
	// throughput, so the extra ms and the headroom are unknown; capacity
	// 1·1000 ms/s.
	ac := base
	ac.Migration = readiness.Migration{From: "A", To: "C", ToFraction: 0.25, RecomputeHorizon: 10 * time.Second,
		ToCapacityMsPerSec: 1000}
	// Hot: P, Q (2 requests each), R (1), all cached on A and not on C; S
	// is on neither.
	hotR := readiness.HotPrefix{FirstBlockHash: chR[0], Blocks: 12, DepthFrom: 12, Requests: 1, PromptTokens: 200, ExtraTokens: 192}
	ac.HotPrefixes = append([]readiness.HotPrefix{}, ab.HotPrefixes...)
	ac.HotPrefixes[0].DepthTo, ac.HotPrefixes[1].DepthTo = 0, 0
	ac.HotPrefixes[0].ExtraTokens = uint64(ac.HotPrefixes[0].DepthFrom) * 16
	ac.HotPrefixes[1].ExtraTokens = uint64(ac.HotPrefixes[1].DepthFrom) * 16
	ac.HotPrefixes = append(ac.HotPrefixes, hotR)

	tests := []struct {
		name string
		q    readiness.Query
		want readiness.Status
	}{
		{"A to B", readiness.Query{From: "A", To: "B"}, ab},
		{"A to B, top 1", readiness.Query{From: "A", To: "B", TopK: 1}, abTop1},
		{"B to A", readiness.Query{From: "B", To: "A"}, ba},
		{"A to C", readiness.Query{From: "A", To: "C"}, ac},
	}
	tr := readiness.New(readiness.Config{Window: time.Minute, Buckets: 6})
	record(tr, scriptedPool, scriptedPicks)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tr.Status(at(30*time.Second), tt.q, scriptedLive())
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Status =\n%+v\nwant\n%+v", got, tt.want)
			}
			checkFinite(t, got)
		})
	}
}

// TestStatusRecomputeHorizon checks the horizon's bounds on the scripted
// picks: the whole window counts every pick's hashes[m_B:], one bucket
// only the current, empty one.
func TestStatusRecomputeHorizon(t *testing.T) {
	for _, c := range []struct {
		horizon time.Duration
		want    uint64
		covers  time.Duration
	}{
		// Picks 1 (p0..p7), 2 (p2..p5), 4 (none), 5 (s0..s2), 6 (q3..q9):
		// 8+3+7 = 18 distinct; the window covers 29 s.
		{time.Minute, 18, 29 * time.Second},
		// 1 ns rounds up to one bucket, [t0+30s, t0+40s): nothing yet.
		{1, 0, 0},
		// 11 s rounds up to 2 buckets, as the default 15 s does.
		{11 * time.Second, 10, 10 * time.Second},
	} {
		tr := readiness.New(readiness.Config{Window: time.Minute, Buckets: 6, RecomputeHorizon: c.horizon})
		record(tr, scriptedPool, scriptedPicks)
		st, err := tr.Status(at(30*time.Second), readiness.Query{From: "A", To: "B"}, scriptedLive())
		if err != nil {
			t.Fatal(err)
		}
		m := st.Migration
		// recompute = f·distinct·bs = 0.75·want·16 = 12·want tokens.
		if m.DistinctBlocks != c.want || m.RecomputeTokens != 12*float64(c.want) || m.RecomputeHorizon != c.covers {
			t.Errorf("horizon %v: distinct %d, recompute %v, covers %v; want %d, %v, %v", c.horizon,
				m.DistinctBlocks, m.RecomputeTokens, m.RecomputeHorizon, c.want, 12*float64(c.want), c.covers)
		}
		checkFinite(t, st)
	}
}
