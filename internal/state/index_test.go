package state

import (
	"fmt"
	"math/bits"
	"math/rand/v2"
	"slices"
	"testing"
	"unsafe"
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

// indexModel is the brute-force reference: the set of (hash, slot) pairs.
type indexModel map[uint64]map[uint32]bool

func (m indexModel) add(h uint64, s uint32) {
	if m[h] == nil {
		m[h] = map[uint32]bool{}
	}
	m[h][s] = true
}

func (m indexModel) remove(h uint64, s uint32) {
	delete(m[h], s)
	if len(m[h]) == 0 {
		delete(m, h)
	}
}

func (m indexModel) pairs() int {
	n := 0
	for _, s := range m {
		n += len(s)
	}
	return n
}

// match is the reference: the number of leading hashes each live slot holds.
func (m indexModel) match(hashes []uint64, live []uint64, slots int) []int32 {
	out := make([]int32, slots)
	for s := range slots {
		if live[s/64]&(1<<(s%64)) == 0 {
			continue
		}
		k := 0
		for k < len(hashes) && m[hashes[k]][uint32(s)] {
			k++
		}
		out[s] = int32(k)
	}
	return out
}

// compareIndex checks x against m: pairs, membership and bookkeeping.
func compareIndex(x *prefixIndex, m indexModel) error {
	if x.pairs != m.pairs() {
		return fmt.Errorf("pairs %d, model %d", x.pairs, m.pairs())
	}
	view := x.view()
	if len(view) != len(m) {
		return fmt.Errorf("%d blocks, model %d", len(view), len(m))
	}
	for h, ss := range m {
		for s := range ss {
			if !x.holds(h, s) {
				return fmt.Errorf("index lacks (%#x, %d)", h, s)
			}
		}
		if view[h].n != len(ss) {
			return fmt.Errorf("block %#x: n %d, model %d", h, view[h].n, len(ss))
		}
	}
	return x.check()
}

// randomIndex fills an index over slots with prefixes of chains: each slot
// holds a random prefix of some chains, plus stray blocks from the middle
// of chains (held without their predecessors), then some removals.
func randomIndex(rng *rand.Rand, slots int, chains [][]uint64) (prefixIndex, indexModel) {
	x, m := newIndexFor(slots), indexModel{}
	for s := range uint32(slots) {
		for _, ch := range chains {
			if rng.IntN(3) == 0 {
				continue
			}
			n := rng.IntN(len(ch) + 1)
			for _, h := range ch[:n] {
				x.add(h, s)
				m.add(h, s)
			}
			if rng.IntN(4) == 0 {
				h := ch[rng.IntN(len(ch))]
				x.add(h, s)
				m.add(h, s)
			}
		}
	}
	// Random removals punch holes in prefixes and thin dense sets.
	for range rng.IntN(slots * 4) {
		ch := chains[rng.IntN(len(chains))]
		h, s := ch[rng.IntN(len(ch))], uint32(rng.IntN(slots))
		x.remove(h, s)
		m.remove(h, s)
	}
	return x, m
}

// randomRequest returns a prefix of a chain, maybe followed by a divergent
// tail of unknown hashes or blocks of another chain.
func randomRequest(rng *rand.Rand, chains [][]uint64) []uint64 {
	ch := chains[rng.IntN(len(chains))]
	req := slices.Clone(ch[:rng.IntN(len(ch)+1)])
	switch rng.IntN(4) {
	case 0:
		for range rng.IntN(5) {
			req = append(req, 1<<40+rng.Uint64N(1000))
		}
	case 1:
		other := chains[rng.IntN(len(chains))]
		req = append(req, other[:rng.IntN(len(other)+1)]...)
	}
	return req
}

func makeChains(rng *rand.Rand, n, maxLen int) [][]uint64 {
	chains := make([][]uint64, n)
	for i := range chains {
		chains[i] = make([]uint64, 1+rng.IntN(maxLen))
		for k := range chains[i] {
			chains[i][k] = rng.Uint64()
		}
	}
	return chains
}

// TestIndexMatchModel: for random holdings over up to 300 slots and random
// hash lists, match gives every slot the number of leading hashes it holds.
func TestIndexMatchModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(42, 7))
	for trial := range 60 {
		slots := 1 + rng.IntN(300)
		chains := makeChains(rng, 1+rng.IntN(6), 40)
		x, m := randomIndex(rng, slots, chains)
		if err := compareIndex(&x, m); err != nil {
			t.Fatalf("trial %d: %v", trial, err)
		}
		for q := range 20 {
			live := allLive(&x, slots)
			if q%2 == 1 { // some instances filtered out
				for s := range slots {
					if rng.IntN(4) == 0 {
						live[s/64] &^= 1 << (s % 64)
					}
				}
			}
			req := randomRequest(rng, chains)
			got := runMatch(t, &x, req, live)
			want := m.match(req, live, slots)
			if !slices.Equal(got[:slots], want) {
				t.Fatalf("trial %d query %d (%d slots, %d hashes): match\n got %v\nwant %v", trial, q, slots, len(req), got[:slots], want)
			}
			for s := slots; s < len(got); s++ {
				if got[s] != 0 {
					t.Fatalf("trial %d: unused slot %d = %d", trial, s, got[s])
				}
			}
		}
	}
}

// TestIndexPairsModel: a random add/remove sequence keeps pairs and every
// holder set exact, through sparse and dense forms.
func TestIndexPairsModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 14))
	x, m := newIndexFor(1), indexModel{}
	slots := 1
	for step := range 20000 {
		switch op := rng.IntN(10); {
		case op == 0 && slots < 300:
			slots += rng.IntN(20)
			x.grow(uint32(slots - 1))
		case op < 6:
			h, s := uint64(rng.IntN(20)), uint32(rng.IntN(slots))
			x.add(h, s)
			m.add(h, s)
		default:
			h, s := uint64(rng.IntN(20)), uint32(rng.IntN(slots))
			x.remove(h, s)
			m.remove(h, s)
		}
		if step%97 == 0 {
			if err := compareIndex(&x, m); err != nil {
				t.Fatalf("step %d: %v", step, err)
			}
		}
	}
	if err := compareIndex(&x, m); err != nil {
		t.Fatal(err)
	}
}

// FuzzIndexMatch: op bytes build holdings over up to 300 slots; the rest of
// the input is the request. match must agree with the brute-force model.
func FuzzIndexMatch(f *testing.F) {
	f.Add(uint16(3), []byte{0, 0, 1, 0, 0, 1, 1, 1}, []byte{0, 1, 2})
	f.Add(uint16(200), []byte{0, 10, 0, 70, 0, 130, 0, 199, 1, 10, 1, 130, 2, 130}, []byte{0, 1, 2, 3})
	f.Add(uint16(300), []byte{5, 0, 5, 1, 5, 2, 5, 3, 5, 4, 5, 5, 5, 6, 5, 7, 133, 3}, []byte{5, 5, 6})
	f.Fuzz(func(t *testing.T, nslots uint16, ops []byte, req []byte) {
		slots := 1 + int(nslots%300)
		x, m := newIndexFor(slots), indexModel{}
		// Each op is (hash byte, slot byte): hash bit 7 set means remove; the
		// slot byte is scaled over the slots.
		for i := 0; i+1 < len(ops); i += 2 {
			h := uint64(ops[i] & 15)
			s := uint32(int(ops[i+1]) * slots / 256)
			if ops[i]&128 != 0 {
				x.remove(h, s)
				m.remove(h, s)
			} else {
				x.add(h, s)
				m.add(h, s)
			}
		}
		if err := compareIndex(&x, m); err != nil {
			t.Fatal(err)
		}
		hashes := make([]uint64, len(req))
		for i, b := range req {
			hashes[i] = uint64(b & 15)
		}
		live := allLive(&x, slots)
		if len(req) > 0 && req[0]&16 != 0 {
			for s := 0; s < slots; s += 3 {
				live[s/64] &^= 1 << (s % 64)
			}
		}
		got := runMatch(t, &x, hashes, live)
		if want := m.match(hashes, live, slots); !slices.Equal(got[:slots], want) {
			t.Fatalf("match\n got %v\nwant %v", got[:slots], want)
		}
	})
}

// TestIndexTablesGrowAndSplit drives the hash tables through doubling,
// splitting (directory growth) and backward-shift deletion with enough
// blocks to need many tables, sequential hashes (0 included) and random
// ones, against the model.
func TestIndexTablesGrowAndSplit(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	const slots = 70 // two bitset words
	x, m := newIndexFor(slots), indexModel{}
	hashes := make([]uint64, 0, 40000)
	for i := range uint64(20000) {
		hashes = append(hashes, i, rng.Uint64())
	}
	for round := range 3 {
		for _, h := range hashes {
			for range 1 + rng.IntN(5) { // inline, list and bitset holder sets
				s := uint32(rng.IntN(slots))
				x.add(h, s)
				m.add(h, s)
			}
		}
		if x.depth == 0 {
			t.Fatalf("round %d: %d blocks in one table", round, x.count)
		}
		if err := compareIndex(&x, m); err != nil {
			t.Fatalf("round %d after adds: %v", round, err)
		}
		// Remove most pairs, in random order, so probe runs get holes.
		for _, i := range rng.Perm(len(hashes)) {
			h := hashes[i]
			for s := range m[h] {
				if rng.IntN(5) > 0 {
					x.remove(h, s)
					m.remove(h, s)
				}
			}
		}
		if err := compareIndex(&x, m); err != nil {
			t.Fatalf("round %d after removes: %v", round, err)
		}
	}
	for h, ss := range m {
		for s := range ss {
			x.remove(h, s)
		}
	}
	if x.count != 0 || x.pairs != 0 || len(x.freeLists) != x.lists.len() || len(x.freeSets) != x.bitsets.len() {
		t.Fatalf("emptied index: %d blocks, %d pairs, %d of %d lists and %d of %d bitsets free", x.count, x.pairs,
			len(x.freeLists), x.lists.len(), len(x.freeSets), x.bitsets.len())
	}
	if err := x.check(); err != nil {
		t.Fatal(err)
	}
}

// TestResolverFinds: the resolver's find gives x.find's entry (nil for
// blocks no one holds) for every block of random requests over indexes of
// up to 300 slots (some with split tables), requests of up to 3·ring
// blocks.
func TestResolverFinds(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 5))
	for trial := range 40 {
		chains := makeChains(rng, 1+rng.IntN(6), 3*ring)
		x, _ := randomIndex(rng, 1+rng.IntN(300), chains)
		if trial%10 == 0 { // enough blocks to split tables
			for range 20000 {
				x.add(rng.Uint64(), 0)
			}
			if x.depth == 0 {
				t.Fatalf("trial %d: no table split", trial)
			}
		}
		for range 10 {
			req := randomRequest(rng, chains)
			for i := range req {
				if rng.IntN(8) == 0 {
					req[i] = rng.Uint64() // most likely held by no one
				}
			}
			r := resolver{x: &x, hashes: req}
			for k, h := range req {
				if got, want := r.find(k), x.find(h); got != want {
					t.Fatalf("trial %d: block %d of %d: resolver %p, find %p", trial, k, len(req), got, want)
				}
			}
		}
	}
}

// TestPrefetchAnyAddress: prefetch is a hint, so addresses nothing is
// mapped at (nil, the top of the address space) must not fault.
func TestPrefetchAnyAddress(t *testing.T) {
	v := uint64(7)
	addrs := [peekAhead]uintptr{0, 1, ^uintptr(0), ^uintptr(0) - 4096, uintptr(unsafe.Pointer(&v))}
	prefetch(&addrs)
	if v != 7 {
		t.Fatalf("prefetch changed memory: %d", v)
	}
}
