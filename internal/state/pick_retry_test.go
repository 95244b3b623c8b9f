package state

import (
	"math/rand/v2"
	"testing"
)

// TestPickRetriesOnConcurrentPick: pick A decides, and before it accounts
// its work, pick B decides and accounts onto the same instance (a hook
// between A's decision and its accounting plays B). Both choose the idle
// instance "a" over "b", which reports 5 s of queue. A finds B's work on
// "a", decides again with the same draws, and is priced behind B's prefill
// (its QueueMs is B's PrefillMs), not as if "a" were idle.
// A pick that does not overlap another never retries.
func TestPickRetriesOnConcurrentPick(t *testing.T) {
	_, p := newTestPool(t, Limits{})
	connect(t, p, t0, "dep", "a", &Report{PrefillTokensPerSecond: 10000})
	connect(t, p, t0, "dep", "b", &Report{PrefillTokensPerSecond: 10000, WaitingRequests: 1, QueuedPrefillTokens: 50000,
		QueueMs: 5000, HasQueueMs: true})
	in := func(i uint64) *PickInput { return &PickInput{Hashes: []uint64{i<<8 | 1}, PromptTokens: 1000} }
	var a, b Pick
	rngA, rngB := rand.New(rand.NewPCG(1, 1)), rand.New(rand.NewPCG(2, 2))
	played := false
	testHookBeforeAccount = func() {
		if played {
			return
		}
		played = true
		if err := p.Pick(t0, in(2), rngB, &b); err != nil {
			t.Error(err)
		}
	}
	defer func() { testHookBeforeAccount = nil }()
	if err := p.Pick(t0, in(1), rngA, &a); err != nil {
		t.Fatal(err)
	}
	idOf := func(pk *Pick) string { return pk.Snapshot.Instances[pk.Decision.Instance].ID }
	if idOf(&a) != "a" || idOf(&b) != "a" {
		t.Fatalf("picks went to %s and %s, want both on the idle a", idOf(&a), idOf(&b))
	}
	if got := p.Retries(); got != 1 {
		t.Fatalf("Retries() = %d, want 1", got)
	}
	bWork := b.Decision.Instances[b.Decision.Instance].PrefillMs
	if q := a.Decision.Instances[a.Decision.Instance].QueueMs; q < bWork*0.999 || q > bWork*1.001 {
		t.Fatalf("A priced behind %.1f ms of queue, want B's prefill %.1f ms", q, bWork)
	}
	first := rand.New(rand.NewPCG(1, 1)).Float64()
	if a.Decision.DeploymentDraw != first {
		t.Fatalf("A's retry drew %v for the deployment, want its first attempt's %v", a.Decision.DeploymentDraw, first)
	}
	if err := p.Pick(t0, in(3), rngA, &a); err != nil {
		t.Fatal(err)
	}
	if got := p.Retries(); got != 1 {
		t.Fatalf("Retries() = %d after a pick alone, want still 1", got)
	}
	mustInvariants(t, p)
}
