package state

import (
	"slices"
	"testing"
	"time"
)

func seq(from, n uint64) []uint64 {
	out := make([]uint64, n)
	for i := range out {
		out[i] = from + uint64(i)
	}
	return out
}

// TestIndexPairBudget: the router never holds more than MaxIndexPairs
// (block, instance) pairs over all pools; at the cap exactly, nothing is
// evicted; past it, the adding pool's largest instance loses its least
// recently used blocks; forgetting an instance returns its pairs.
func TestIndexPairBudget(t *testing.T) {
	r := NewRegistry(Limits{MaxIndexPairs: 10})
	a, _ := r.Ensure("a")
	b, _ := r.Ensure("b")
	sa := connect(t, a, t0, "d", "a1", &Report{ReportsCacheEvents: true, Stored: seq(100, 6)})
	sb := connect(t, b, t0, "d", "b1", &Report{ReportsCacheEvents: true, Stored: seq(200, 4)})
	if held, ev := r.IndexPairs(); held != 10 || ev != 0 {
		t.Fatalf("at the cap: held %d evicted %d, want 10 and 0", held, ev)
	}
	// Three more on b: b1 is b's largest, its three oldest go.
	mustReport(t, sb, t0, &Report{ReportsCacheEvents: true, Stored: seq(300, 3)})
	if held, ev := r.IndexPairs(); held != 10 || ev != 3 {
		t.Fatalf("past the cap: held %d evicted %d, want 10 and 3", held, ev)
	}
	if got, want := cached(b, "b1"), []uint64{302, 301, 300, 203}; !slices.Equal(got, want) {
		t.Errorf("b1 holds %v, want %v (most recent first)", got, want)
	}
	if got := cached(a, "a1"); len(got) != 6 {
		t.Errorf("a1 lost blocks to b's overflow: %v", got)
	}
	for _, p := range []*Pool{a, b} {
		if err := checkInvariants(p); err != nil {
			t.Fatal(err)
		}
	}
	sa.Close(t0)
	if n := a.Sweep(t0.Add(time.Hour)); n != 1 {
		t.Fatalf("Sweep forgot %d", n)
	}
	if held, _ := r.IndexPairs(); held != 4 {
		t.Errorf("after a1 is forgotten: held %d, want 4", held)
	}
	// With room again, b grows.
	mustReport(t, sb, t0, &Report{ReportsCacheEvents: true, Stored: seq(400, 6)})
	if held, ev := r.IndexPairs(); held != 10 || ev != 3 {
		t.Errorf("refilled: held %d evicted %d, want 10 and 3", held, ev)
	}
}

// TestIndexPairBudgetApproximate: picks that record guessed blocks obey the
// cap too.
func TestIndexPairBudgetApproximate(t *testing.T) {
	r := NewRegistry(Limits{MaxIndexPairs: 5})
	p, _ := r.Ensure("p")
	connect(t, p, t0, "d", "i", &Report{})
	var pk Pick
	pickOnce(t, p, t0, &PickInput{Hashes: seq(1, 8), PromptTokens: 128}, 1, &pk)
	if held, ev := r.IndexPairs(); held != 5 || ev != 3 {
		t.Fatalf("held %d evicted %d, want 5 and 3", held, ev)
	}
	if err := checkInvariants(p); err != nil {
		t.Fatal(err)
	}
}
