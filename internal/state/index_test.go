package state

import (
	"fmt"
	"math/bits"
	"slices"
	"testing"
)

// newIndexFor returns an empty index whose bitsets cover slots [0, slots).
func newIndexFor(slots int) prefixIndex {
	x := newPrefixIndex()
	if slots > 0 {
		x.grow(uint32(slots - 1))
	}
	return x
}

// allLive returns a live bitset of x.words words with slots [0, n) set.
func allLive(x *prefixIndex, n int) []uint64 {
	live := make([]uint64, x.words)
	for s := range n {
		live[s/64] |= 1 << (s % 64)
	}
	return live
}

// runMatch calls x.matchLogged with fresh scratch sized for x and checks its
// log against the counts: every slot with a count > 0 in exactly one group,
// with that count, no other slot, counts never decreasing.
func runMatch(t testing.TB, x *prefixIndex, hashes, live []uint64) []int32 {
	t.Helper()
	matched := make([]int32, x.words*64)
	for i := range matched {
		matched[i] = -7 // match must overwrite every entry
	}
	drops := []matchDrop{{k: -1}} // matchLogged must empty it first
	x.matchLogged(hashes, live, matched, make([]uint64, x.words), make([]uint64, x.words), &drops)
	logged := make([]int32, len(matched))
	last := int32(0)
	for _, d := range drops {
		if d.k < last || d.k <= 0 || d.bits == 0 {
			t.Fatalf("match log: group %+v after count %d", d, last)
		}
		last = d.k
		for b := d.bits; b != 0; b &= b - 1 {
			s := int(d.w)*64 + bits.TrailingZeros64(b)
			if logged[s] != 0 {
				t.Fatalf("match log: slot %d in two groups", s)
			}
			logged[s] = d.k
		}
	}
	for s := range matched {
		if m := max(matched[s], 0); logged[s] != m {
			t.Fatalf("match log: slot %d logged %d, matched %d", s, logged[s], matched[s])
		}
	}
	// Log only (matched nil), then the counts of every other slot from the
	// log: the same log, the same counts, other slots untouched.
	var only []matchDrop
	x.matchLogged(hashes, live, nil, make([]uint64, x.words), make([]uint64, x.words), &only)
	if !slices.Equal(only, drops) {
		t.Fatalf("match log without counts: %v, with: %v", only, drops)
	}
	mask := make([]uint64, x.words)
	counts := make([]int32, len(matched))
	for s := range counts {
		counts[s] = -7
		if s%2 == 0 {
			mask[s/64] |= 1 << (s % 64)
		}
	}
	setCounts(only, mask, counts)
	for s := range counts {
		if want := int32(-7); s%2 == 0 && counts[s] != matched[s] || s%2 == 1 && counts[s] != want {
			t.Fatalf("setCounts: slot %d = %d, matched %d", s, counts[s], matched[s])
		}
	}
	return matched
}

func TestIndexAddRemoveIdempotent(t *testing.T) {
	x := newIndexFor(4)
	x.add(10, 1)
	x.add(10, 1)
	x.add(10, 2)
	if x.pairs != 2 || len(x.view()) != 1 || x.view()[10].n != 2 {
		t.Fatalf("after adds: pairs %d entries %d", x.pairs, len(x.view()))
	}
	x.remove(10, 3) // not a holder
	x.remove(11, 1) // unknown block
	if x.pairs != 2 {
		t.Fatalf("removing absent pairs changed pairs to %d", x.pairs)
	}
	x.remove(10, 1)
	x.remove(10, 1)
	if x.pairs != 1 || !x.holds(10, 2) || x.holds(10, 1) {
		t.Fatalf("after removes: pairs %d", x.pairs)
	}
	x.remove(10, 2)
	if x.pairs != 0 || len(x.view()) != 0 {
		t.Fatalf("emptied block still present: pairs %d entries %d", x.pairs, len(x.view()))
	}
	if err := x.check(); err != nil {
		t.Fatal(err)
	}
}

// TestIndexSparseToDense: a block goes dense once it has more than 2*words
// holders, stays correct through removals (it stays a bitset), and is
// deleted when its last holder goes; re-added it is sparse again.
func TestIndexSparseToDense(t *testing.T) {
	for _, slots := range []int{64, 65, 130, 300} {
		t.Run(fmt.Sprint(slots, " slots"), func(t *testing.T) {
			x := newIndexFor(slots)
			words := (slots + 63) / 64
			if x.words != words {
				t.Fatalf("words %d, want %d", x.words, words)
			}
			// Holders spread over every word, highest slot included.
			var holders []uint32
			for s := slots - 1; s >= 0; s -= 1 + slots/(2*words+3) {
				holders = append(holders, uint32(s))
			}
			if len(holders) <= 2*words {
				t.Fatalf("test setup: %d holders for %d words", len(holders), words)
			}
			for i, s := range holders {
				x.add(1, s)
				h := x.view()[1]
				wantDense := i+1 > 2*words
				if (h.dense != nil) != wantDense {
					t.Fatalf("after %d holders over %d words: dense %v, want %v", i+1, words, h.dense != nil, wantDense)
				}
				if err := x.check(); err != nil {
					t.Fatal(err)
				}
			}
			live := allLive(&x, slots)
			got := runMatch(t, &x, []uint64{1}, live)
			for s := range slots {
				want := int32(0)
				if slices.Contains(holders, uint32(s)) {
					want = 1
				}
				if got[s] != want {
					t.Fatalf("dense match: slot %d = %d, want %d", s, got[s], want)
				}
			}
			// Remove down to one holder: still a bitset, still exact.
			for _, s := range holders[1:] {
				x.remove(1, s)
				if err := x.check(); err != nil {
					t.Fatal(err)
				}
			}
			if h := x.view()[1]; h == nil || h.n != 1 || !x.holds(1, holders[0]) {
				t.Fatal("last holder lost")
			}
			got = runMatch(t, &x, []uint64{1}, live)
			for s := range slots {
				if want := int32(b2i(uint32(s) == holders[0])); got[s] != want {
					t.Fatalf("after removals: slot %d = %d, want %d", s, got[s], want)
				}
			}
			x.remove(1, holders[0])
			if len(x.view()) != 0 || x.pairs != 0 {
				t.Fatalf("entry not deleted: %d entries, %d pairs", len(x.view()), x.pairs)
			}
			x.add(1, holders[0])
			if x.view()[1].dense != nil {
				t.Fatal("re-added block is dense")
			}
		})
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestIndexDenseGrowsWithPool: a bitset made while the pool was small is
// extended when a later slot in a higher word joins, and a short bitset
// counts as "not held" for the words it lacks.
func TestIndexDenseGrowsWithPool(t *testing.T) {
	x := newIndexFor(10)
	for s := range uint32(3) {
		x.add(5, s)
	}
	if d := x.view()[5].dense; len(d) != 1 {
		t.Fatalf("dense %v, want one word", d)
	}
	x.grow(199) // the pool grows to 4 words
	live := allLive(&x, 200)
	got := runMatch(t, &x, []uint64{5}, live)
	for s := range 200 {
		if want := int32(b2i(s < 3)); got[s] != want {
			t.Fatalf("slot %d = %d, want %d", s, got[s], want)
		}
	}
	x.add(5, 199)
	if d := x.view()[5].dense; len(d) != 4 || d[3] != 1<<(199%64) {
		t.Fatalf("dense %v after adding slot 199", d)
	}
	if err := x.check(); err != nil {
		t.Fatal(err)
	}
	got = runMatch(t, &x, []uint64{5}, live)
	if got[199] != 1 || got[198] != 0 {
		t.Fatalf("slot 199 = %d, 198 = %d", got[199], got[198])
	}
}

func TestIndexMatchCases(t *testing.T) {
	// Slots 0..3. Chain a,b,c,d; slot 0 holds all, 1 holds a,b, 2 holds b,c,d
	// (not a), 3 holds nothing; slot 0 is not live in the second case.
	const a, b, c, d, e = 11, 12, 13, 14, 15
	x := newIndexFor(4)
	for _, h := range []uint64{a, b, c, d} {
		x.add(h, 0)
	}
	x.add(a, 1)
	x.add(b, 1)
	for _, h := range []uint64{b, c, d} {
		x.add(h, 2)
	}
	tests := []struct {
		name   string
		hashes []uint64
		live   []int
		want   [4]int32
	}{
		{"empty request", nil, []int{0, 1, 2, 3}, [4]int32{}},
		{"full chain", []uint64{a, b, c, d}, []int{0, 1, 2, 3}, [4]int32{4, 2, 0, 0}},
		{"not live slots get 0", []uint64{a, b, c, d}, []int{1, 2, 3}, [4]int32{0, 2, 0, 0}},
		{"unknown first block", []uint64{e, a, b}, []int{0, 1, 2, 3}, [4]int32{}},
		{"unknown later block stops everyone", []uint64{a, b, e, c}, []int{0, 1, 2, 3}, [4]int32{2, 2, 0, 0}},
		{"prefix of the chain", []uint64{a}, []int{0, 1, 2, 3}, [4]int32{1, 1, 0, 0}},
		{"divergent tail", []uint64{a, b, c, e}, []int{0, 1, 2, 3}, [4]int32{3, 2, 0, 0}},
		{"starting mid-chain", []uint64{b, c, d}, []int{0, 1, 2, 3}, [4]int32{3, 1, 3, 0}},
		{"repeated hash", []uint64{a, a, b}, []int{0, 1, 2, 3}, [4]int32{3, 3, 0, 0}},
		{"nobody live", []uint64{a, b}, nil, [4]int32{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			live := make([]uint64, x.words)
			for _, s := range tc.live {
				live[s/64] |= 1 << s
			}
			got := runMatch(t, &x, tc.hashes, live)
			for s := range 64 {
				want := int32(0)
				if s < 4 {
					want = tc.want[s]
				}
				if got[s] != want {
					t.Errorf("slot %d = %d, want %d", s, got[s], want)
				}
			}
		})
	}
}
