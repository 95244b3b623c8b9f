package readiness_test

import (
	"testing"
	"time"

	"github.com/prefixroute/prefixroute/internal/readiness"
	"github.com/prefixroute/prefixroute/scheduler"
)

// TestRecordDisaggregated: a disaggregated pick's prefill figures (hit,
// uncached tokens, prefill ms) are its prefill instance's, in the same
// deployment; a local pick's are its instance's, as before.
func TestRecordDisaggregated(t *testing.T) {
	pl := pool{deps: []string{"a", "b"}, insts: []inst{{0, 16, 2000}, {0, 16, 20000}, {1, 16, 10000}}}
	tr := readiness.New(readiness.Config{})
	pk := pick{at: time.Second, hashes: chain(1, 64), prompt: 1024, instance: 0, depMatch: []int{0, 0}, uncached: 1024, ms: 512}
	snap, d := pl.build(pk)
	// The prefill instance 1 holds 16 blocks: 768 uncached tokens, 38.4 ms.
	snap.Instances[1].MatchedBlocks = 16
	d.Instances[1].UncachedTokens, d.Instances[1].PrefillMs = 768, 38.4
	d.PD = scheduler.PDResult{Reason: scheduler.PDDisaggregated, Prefill: 1}
	tr.Record(at(pk.at), pk.hashes, pk.prompt, snap, d)
	// A local pick on instance 0.
	snap, d = pl.build(pick{at: 2 * time.Second, hashes: chain(2, 64), prompt: 1024, instance: 0, depMatch: []int{0, 0}, uncached: 1000, ms: 500})
	tr.Record(at(2*time.Second), chain(2, 64), 1024, snap, d)
	live := &fakeLive{deps: []readiness.LiveDeployment{{Name: "a", Weight: 1, Instances: 2, PrefillTokensPerSecond: 22000},
		{Name: "b", Weight: 1, Instances: 1, PrefillTokensPerSecond: 10000}}}
	st, err := tr.Status(at(3*time.Second), readiness.Query{From: "a", To: "b"}, live)
	if err != nil {
		t.Fatal(err)
	}
	a := st.Deployments[0]
	if a.Name != "a" || a.Picks != 2 || a.HitTokens != 256 || a.PrefillTokens != 768+1000 || a.PrefillMs != 38.4+500 {
		t.Fatalf("deployment a: %+v; want 2 picks, 256 hit tokens, 1768 prefill tokens, 538.4 ms", a)
	}
}
