package sim

import (
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/prefixroute/prefixroute/internal/rollout"
)

// rampYAML is a small two-deployment scenario with a ramp and a probe;
// extra is spliced in at the top level.
func rampYAML(extra string) string {
	return `
name: ramp
seed: 3
duration: 40s
block_tokens: 16
cache_events: true
deployments:
  - {name: a, instances: 2, prefill_tokens_per_second: 20000, batch_overhead: 5ms, kv_blocks: 2000}
  - {name: b, instances: 2, prefill_tokens_per_second: 20000, batch_overhead: 5ms, kv_blocks: 2000}
workload:
  rate: 30
  classes:
    - {name: shared, share: 0.5, groups: 20, zipf: 1.0, prefix_tokens: 256, suffix_tokens: 40}
    - {name: chat, share: 0.5, kind: conversation, conversations: 10, prefix_tokens: 128, suffix_tokens: 40, user_tokens: 24, output_tokens: 16, turns: 4}
` + extra
}

// TestRampExpandsToPlan: the schedule of a run with a ramp is the explicit
// steps plus exactly rollout.Plan's steps, from the weights in force at the
// ramp's start, each k·interval after it; the run fires every one.
func TestRampExpandsToPlan(t *testing.T) {
	sc := parse(t, rampYAML(`
weights:
  - {at: 0s, weights: {a: 3, b: 1}}
  - {at: 5s, weights: {a: 9, b: 1}}
  - {at: 35s, weights: {a: 1, b: 1}}
ramp: {at: 10s, target: {a: 0, b: 2}, duration: 20s, interval: 6s}
`))
	plan, err := rollout.Plan(map[string]float64{"a": 9, "b": 1}, map[string]float64{"a": 0, "b": 2}, 20*time.Second, 6*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	want := []WeightStep{{At: 0, Weights: map[string]float64{"a": 3, "b": 1}}, {At: Duration(5 * time.Second), Weights: map[string]float64{"a": 9, "b": 1}}}
	at := 10 * time.Second
	for _, st := range plan {
		at += st.After
		want = append(want, WeightStep{At: Duration(at), Weights: st.Weights})
	}
	want = append(want, WeightStep{At: Duration(35 * time.Second), Weights: map[string]float64{"a": 1, "b": 1}})
	rc, err := sc.variantConfig("default")
	if err != nil {
		t.Fatal(err)
	}
	if len(rc.weights) != len(want) || len(plan) != 4 {
		t.Fatalf("schedule has %d steps, want %d (plan %d)", len(rc.weights), len(want), len(plan))
	}
	for i := range want {
		if rc.weights[i].At != want[i].At || !maps.Equal(rc.weights[i].Weights, want[i].Weights) {
			t.Fatalf("step %d: %v %v, want %v %v", i, rc.weights[i].At, rc.weights[i].Weights, want[i].At, want[i].Weights)
		}
	}
	// Steps at 16s, 22s, 28s and the last one, with the target, at 30s.
	if rc.weights[5].At.D() != 30*time.Second || rc.weights[2].At.D() != 16*time.Second || rc.weights[5].Weights["b"] != 2 {
		t.Fatalf("ramp steps %v", rc.weights[2:6])
	}
	res := run(t, sc, "default", RunOptions{})
	if len(res.Changes) != len(want) {
		t.Fatalf("%d weight changes fired, want %d", len(res.Changes), len(want))
	}
	for i, c := range res.Changes {
		if c.At != want[i].At.D() || !maps.Equal(c.Weights, want[i].Weights) {
			t.Fatalf("change %d: %v %v, want %v %v", i, c.At, c.Weights, want[i].At, want[i].Weights)
		}
	}
	if res.Readiness != nil {
		t.Fatal("readiness result without a probe")
	}
}

// TestRampAndProbeErrors: ramp and readiness fields are validated with
// errors naming the field.
func TestRampAndProbeErrors(t *testing.T) {
	ok := "weights: [{at: 0s, weights: {a: 1, b: 0}}]\nramp: {at: 10s, target: {a: 0, b: 1}, duration: 20s, interval: 5s}\n"
	for _, tc := range []struct{ name, extra, want string }{
		{"ok", ok + "readiness: {at: 29s, from: a, to: b, window: 10s}", ""},
		{"unknown target", "ramp: {at: 10s, target: {c: 1}, duration: 20s, interval: 5s}", `ramp.target: unknown deployment "c"`},
		{"negative target", "ramp: {at: 10s, target: {a: -1, b: 1}, duration: 20s, interval: 5s}", `ramp.target: weight of "a" must be finite and >= 0`},
		{"empty target", "ramp: {at: 10s, duration: 20s, interval: 5s}", "ramp.target must give at least one deployment a weight"},
		{"zero target", "ramp: {at: 10s, target: {a: 0}, duration: 20s, interval: 5s}", "every target weight is 0"},
		{"short interval", "ramp: {at: 10s, target: {b: 1}, duration: 20s, interval: 500ms}", "step interval 500ms is below the minimum 1s"},
		{"duration below interval", "ramp: {at: 10s, target: {b: 1}, duration: 2s, interval: 5s}", "duration 2s is shorter than the step interval 5s"},
		{"ramp after the end", "ramp: {at: 40s, target: {b: 1}, duration: 20s, interval: 5s}", "ramp.at 40s must be in [0, duration 40s)"},
		{"step inside the ramp", "weights: [{at: 0s, weights: {a: 1}}, {at: 20s, weights: {a: 2}}]\nramp: {at: 10s, target: {b: 1}, duration: 20s, interval: 5s}",
			"ramp: weights[1] at 20s falls inside the ramp (10s, 30s]"},
		{"variant ramp", "variants: [{name: v, ramp: {at: 10s, target: {b: 1}, duration: 20s, interval: 0s}}]", `variant "v": ramp (duration 20s, interval 0s)`},
		{"variant ramp target", "variants: [{name: v, ramp: {at: 10s, target: {z: 1}, duration: 20s, interval: 5s}}]", `variants[0] (v).ramp.target: unknown deployment "z"`},
		{"probe unknown from", ok + "readiness: {at: 29s, from: x, to: b, window: 10s}", `readiness.from: unknown deployment "x"`},
		{"probe unknown to", ok + "readiness: {at: 29s, from: a, window: 10s}", `readiness.to: unknown deployment ""`},
		{"probe same", ok + "readiness: {at: 29s, from: a, to: a, window: 10s}", `readiness: from and to are the same deployment "a"`},
		{"probe no window", ok + "readiness: {at: 29s, from: a, to: b}", "readiness.window must be > 0"},
		{"probe buckets", ok + "readiness: {at: 29s, from: a, to: b, window: 10s, buckets: 7}", "readiness.window/buckets: readiness: invalid config: window 10s is not a whole number of 7 buckets"},
		{"probe top_k", ok + "readiness: {at: 29s, from: a, to: b, window: 10s, top_k: 101}", "readiness.top_k must be in [0, 100]"},
		{"probe at 0", ok + "readiness: {from: a, to: b, window: 10s}", "readiness.at 0s must be in (0, duration 40s)"},
		{"probe after drain", ok + "readiness: {at: 30s, from: a, to: b, window: 10s}", "readiness: a's weight is already 0 at readiness.at 30s"},
		{"probe no cutover", "weights: [{at: 0s, weights: {a: 1, b: 1}}]\nreadiness: {at: 10s, from: a, to: b, window: 10s}", "readiness: no weight step after readiness.at 10s gives a the weight 0"},
		{"probe to drained", "weights: [{at: 0s, weights: {a: 1, b: 1}}, {at: 20s, weights: {a: 0, b: 0}}]\nreadiness: {at: 10s, from: a, to: b, window: 10s}", "readiness: b's weight is 0 at the cutover (20s)"},
		{"probe window past the end", ok + "readiness: {at: 29s, from: a, to: b, window: 20s}", "readiness: the window after the cutover (30s + 20s) ends after the duration 40s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseScenario([]byte(rampYAML(tc.extra)))
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
}

// TestProbeFiresOnce: the probe asks router 0 exactly once, at its time,
// with the tracker window the scenario configured; baselines have none.
func TestProbeFiresOnce(t *testing.T) {
	sc := parse(t, rampYAML(`weights: [{at: 0s, weights: {a: 1, b: 0}}]
ramp: {at: 10s, target: {a: 0, b: 1}, duration: 20s, interval: 5s}
readiness: {at: 29s, from: a, to: b, window: 10s, buckets: 5}
variants: [{name: router}, {name: rr, picker: round_robin}]
`))
	rc, err := sc.variantConfig("router")
	if err != nil {
		t.Fatal(err)
	}
	e, err := newEngine(rc, RunOptions{}, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.start(); err != nil {
		t.Fatal(err)
	}
	for e.q.Len() > 0 {
		if err := e.handle(e.q.pop()); err != nil {
			t.Fatal(err)
		}
	}
	if e.pr.fires != 1 || !e.pr.cut {
		t.Fatalf("probe fired %d times, cutover seen %v", e.pr.fires, e.pr.cut)
	}
	rr := e.result(0).Readiness
	st := rr.Status
	if !st.Now.Equal(epoch.Add(29*time.Second)) || st.Window != 10*time.Second || st.Covered != 9*time.Second {
		t.Fatalf("status at %v, window %v, covered %v", st.Now, st.Window, st.Covered)
	}
	if rr.Cutover != 30*time.Second || rr.After != 10*time.Second || rr.Before != 9*time.Second || rr.From != "a" || rr.To != "b" {
		t.Fatalf("readiness %+v", rr)
	}
	if !st.Migration.Tracked || st.Picks == 0 {
		t.Fatalf("migration %+v, %d picks", st.Migration, st.Picks)
	}
	if got := run(t, sc, "rr", RunOptions{}).Readiness; got != nil {
		t.Fatalf("baseline has a readiness result: %+v", got)
	}
	if got := run(t, sc, "router", RunOptions{Duration: 20 * time.Second}).Readiness; got != nil {
		t.Fatal("a run ending before the probe has a readiness result")
	}
}

// TestRecomputeExact: one 160-token prefix (10 blocks of 16) and an 8-token
// unique suffix, one request a second. Until the cutover at 9.5 s every
// request goes to a, which then holds exactly the prefix's 10 blocks; the
// request at 10 s goes to b, which prefills all 168 tokens, and every later
// one hits b's cache but for its suffix. The actual recompute is the
// prefix: 10 blocks, 160 tokens, counted once; the estimate's recompute
// horizon (a quarter of its 4 s window: one bucket, [9 s, 10 s)) saw the
// same 10 blocks in the 9 s request on a, which b lacked. Its moved
// prefill is a's: 4 requests × 8 suffix tokens.
func TestRecomputeExact(t *testing.T) {
	sc := parse(t, `
name: exact-recompute
seed: 4
duration: 16s
block_tokens: 16
cache_events: true
deployments:
  - {name: a, instances: 1, prefill_tokens_per_second: 10000, batch_overhead: 5ms, kv_blocks: 1000}
  - {name: b, instances: 1, prefill_tokens_per_second: 10000, batch_overhead: 5ms, kv_blocks: 1000}
weights:
  - {at: 0s, weights: {a: 1, b: 0}}
  - {at: 9.5s, weights: {a: 0, b: 1}}
readiness: {at: 9.2s, from: a, to: b, window: 4s, buckets: 4}
workload:
  rate: 1
  arrivals: uniform
  classes:
    - {name: p, share: 1, groups: 1, prefix_tokens: 160, suffix_tokens: 8}
`)
	res := run(t, sc, "default", RunOptions{})
	rr := res.Readiness
	if rr == nil {
		t.Fatal("no readiness result")
	}
	g := &rr.Gap
	if rr.RecomputedBlocks != 10 || rr.RecomputedTokens != 160 || rr.FromOnlyBlocks != 10 {
		t.Fatalf("recomputed %d blocks, %d tokens; a-only at cutover %d; want 10, 160, 10", rr.RecomputedBlocks, rr.RecomputedTokens, rr.FromOnlyBlocks)
	}
	if g.Exact != 10 || g.Both != 10 || g.ToHeld+g.FromEvicted+g.NotRequested+g.GapMatched+g.OlderMatched+g.NeverMatched != 0 {
		t.Fatalf("gap %+v", g)
	}
	m := &rr.Status.Migration
	if m.DistinctBlocks != 10 || m.RecomputeTokens != 160 || m.ToFraction != 1 || rr.RecomputeRatio() != 1 {
		t.Fatalf("estimate %+v", m)
	}
	// Requests at 6, 7, 8 and 9 s in the estimate's span [6 s, 9.2 s), all on
	// a; at 10..13 s in the window after: 168 + 3 × 8 tokens on b.
	if rr.Before != 3200*time.Millisecond || rr.ToPrefilledBefore != 0 || rr.ToPrefilledAfter != 192 || rr.ToAfterPerSec != 48 {
		t.Fatalf("before %v: %d tokens; after: %d tokens, %v/s", rr.Before, rr.ToPrefilledBefore, rr.ToPrefilledAfter, rr.ToAfterPerSec)
	}
	if m.MovedPrefillTokens != 32 || g.After.FromOnlyFirst != 40 || g.After.New != 0 || g.After.Partial != 8 {
		t.Fatalf("moved %d tokens; after mix %+v", m.MovedPrefillTokens, g.After)
	}
}
