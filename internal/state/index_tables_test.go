package state

import (
	"math/rand/v2"
	"testing"
	"unsafe"
)

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
