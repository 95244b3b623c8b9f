package kvalign

import (
	"errors"
	"slices"
	"testing"

	"github.com/prefixroute/prefixroute/internal/kvevents"
	"github.com/prefixroute/prefixroute/pkg/prefixhash"
)

const bs = 4

var seed = prefixhash.Seed("llama", "tenant-a")

// toks returns n blocks of tokens starting at from.
func toks(from, blocks int) []uint32 {
	out := make([]uint32, blocks*bs)
	for i := range out {
		out[i] = uint32(from + i)
	}
	return out
}

func stored(hashes []uint64, parent *uint64, tokens []uint32) *kvevents.Event {
	ev := &kvevents.Event{Kind: kvevents.KindStored, BlockHashes: hashes, TokenIDs: tokens, BlockSize: bs}
	if parent != nil {
		ev.Parent, ev.HasParent = *parent, true
	}
	return ev
}

func removed(hashes ...uint64) *kvevents.Event {
	return &kvevents.Event{Kind: kvevents.KindRemoved, BlockHashes: hashes}
}

func ptr(v uint64) *uint64 { return &v }

// held returns the aligner's router hashes, sorted.
func held(a *Aligner) []uint64 {
	s := a.Snapshot(nil)
	slices.Sort(s)
	return s
}

func sorted(v ...[]uint64) []uint64 {
	s := slices.Concat(v...)
	slices.Sort(s)
	return s
}

// TestAlignment proves the alignment: a gateway hashing a prompt's tokens
// with prefixhash gets exactly the blocks the aligner reported, through
// multi-block prompts split over several events, shared prefixes,
// evictions in the middle of a chain, and a child whose parent was evicted
// before it arrived.
func TestAlignment(t *testing.T) {
	a := New(seed, bs, 1000)
	var d Delta
	apply := func(ev *kvevents.Event) {
		t.Helper()
		if err := a.Apply(ev, &d); err != nil {
			t.Fatal(err)
		}
	}
	// Prompt P: 5 blocks, stored as 3 then 2 (a chunked prefill).
	p := toks(100, 5)
	gw := prefixhash.Tokens(nil, seed, bs, p)
	apply(stored([]uint64{1, 2, 3}, nil, p[:3*bs]))
	apply(stored([]uint64{4, 5}, ptr(3), p[3*bs:]))
	if !slices.Equal(d.Stored, gw) || !slices.Equal(held(a), sorted(gw)) {
		t.Fatalf("stored %x, gateway hashes %x", d.Stored, gw)
	}
	// Prompt Q shares P's first 2 blocks: the engine stores only its 2 new
	// blocks, children of engine block 2.
	q := slices.Concat(p[:2*bs], toks(900, 2))
	gq := prefixhash.Tokens(nil, seed, bs, q)
	if !slices.Equal(gq[:2], gw[:2]) {
		t.Fatal("shared prefix hashes differ")
	}
	d.Reset()
	apply(stored([]uint64{21, 22}, ptr(2), q[2*bs:]))
	if !slices.Equal(d.Stored, gq[2:]) {
		t.Fatalf("Q's new blocks %x, want %x", d.Stored, gq[2:])
	}
	// Evict P's block 3 (the middle of its chain): the router hash goes,
	// and the gateway's hash 3 of P is no longer held; 1, 2, 4, 5 are.
	d.Reset()
	apply(removed(3))
	if !slices.Equal(d.Removed, gw[2:3]) || slices.Contains(held(a), gw[2]) {
		t.Fatalf("removed %x, want %x", d.Removed, gw[2:3])
	}
	// A child of the evicted block 3 arrives: P's prefix extended by one
	// block. Its parent resolves through the removed blocks.
	r := slices.Concat(p, toks(500, 1))
	gr := prefixhash.Tokens(nil, seed, bs, r)
	d.Reset()
	apply(stored([]uint64{6}, ptr(5), r[5*bs:]))
	apply(stored([]uint64{7}, ptr(3), toks(700, 1)))
	want := prefixhash.Tokens(nil, gw[2], bs, toks(700, 1))
	if !slices.Equal(d.Stored, []uint64{gr[5], want[0]}) {
		t.Fatalf("children stored %x, want %x %x", d.Stored, gr[5], want[0])
	}
	// A child whose parent the aligner never saw is a miss, not a guess.
	d.Reset()
	apply(stored([]uint64{8}, ptr(999), toks(800, 1)))
	if len(d.Stored) != 0 || a.Stats().Misses != 1 {
		t.Fatalf("orphan stored %x, misses %d", d.Stored, a.Stats().Misses)
	}
	// Everything the gateway hashes for P, Q, R is held except P's block 3.
	if got, want := held(a), sorted(gw[:2], gw[3:], gq[2:], gr[5:], want); !slices.Equal(got, want) {
		t.Fatalf("held %x\nwant %x", got, want)
	}
	// Cleared drops everything.
	d.Reset()
	apply(&kvevents.Event{Kind: kvevents.KindCleared})
	if !d.Cleared || a.Len() != 0 {
		t.Fatalf("after clear: %+v, %d held", d, a.Len())
	}
}

// mustApply applies ev to a into d and fails the test on an error.
func mustApply(t *testing.T, a *Aligner, ev *kvevents.Event, d *Delta) {
	t.Helper()
	if err := a.Apply(ev, d); err != nil {
		t.Fatalf("Apply(%v): %v", ev.Kind, err)
	}
}

// TestSharedRouterHash: two engine blocks with one router hash (same
// tokens, different engine keys) are reported once, removed with the last.
func TestSharedRouterHash(t *testing.T) {
	a := New(seed, bs, 100)
	var d Delta
	mustApply(t, a, stored([]uint64{1}, nil, toks(0, 1)), &d)
	mustApply(t, a, stored([]uint64{2}, nil, toks(0, 1)), &d)
	if len(d.Stored) != 1 {
		t.Fatalf("stored %x, want one hash", d.Stored)
	}
	d.Reset()
	mustApply(t, a, removed(1), &d)
	if len(d.Removed) != 0 || a.Len() != 1 {
		t.Fatalf("removed %x while engine block 2 holds it", d.Removed)
	}
	mustApply(t, a, removed(2), &d)
	if len(d.Removed) != 1 || a.Len() != 0 {
		t.Fatalf("removed %x after the last holder", d.Removed)
	}
}

// TestSkipped: LoRA, CPU, extra keys and other groups are not reported;
// malformed token counts are misses.
func TestSkipped(t *testing.T) {
	a := New(seed, bs, 100)
	var d Delta
	for _, ev := range []*kvevents.Event{
		{Kind: kvevents.KindStored, BlockHashes: []uint64{1}, TokenIDs: toks(0, 1), BlockSize: bs, LoRA: true},
		{Kind: kvevents.KindStored, BlockHashes: []uint64{2}, TokenIDs: toks(0, 1), BlockSize: bs, Medium: "CPU"},
		{Kind: kvevents.KindStored, BlockHashes: []uint64{3}, TokenIDs: toks(0, 1), BlockSize: bs, Group: 1},
		{Kind: kvevents.KindStored, BlockHashes: []uint64{4, 5}, TokenIDs: toks(0, 2), BlockSize: bs, ExtraKeys: []bool{false, true}},
		{Kind: kvevents.KindStored, BlockHashes: []uint64{6, 7}, TokenIDs: toks(0, 1), BlockSize: bs},
		{Kind: kvevents.KindRemoved, BlockHashes: []uint64{2}, Medium: "CPU"},
		{Kind: kvevents.KindRemoved, BlockHashes: []uint64{42}},
	} {
		if err := a.Apply(ev, &d); err != nil {
			t.Fatal(err)
		}
	}
	want := Stats{Misses: 2, LoRA: 1, OtherMedium: 2, ExtraKeys: 1, OtherGroup: 1}
	if a.Stats() != want || !slices.Equal(d.Stored, prefixhash.Tokens(nil, seed, bs, toks(0, 1))) {
		t.Fatalf("stats %+v (want %+v), stored %x", a.Stats(), want, d.Stored)
	}
}

// TestLimits: a block size other than the pool's names both; more blocks
// than the bound is ErrOverCapacity, at the edge exactly.
func TestLimits(t *testing.T) {
	a := New(seed, bs, 3)
	var d Delta
	err := a.Apply(&kvevents.Event{Kind: kvevents.KindStored, BlockHashes: []uint64{1}, TokenIDs: toks(0, 2), BlockSize: 8}, &d)
	if !errors.Is(err, ErrBlockSize) || err.Error() != "block size mismatch: the engine's BlockStored has block_size 8 tokens, the pool's block size is 4 tokens (--block-size)" {
		t.Fatalf("error %v", err)
	}
	if err := a.Apply(stored([]uint64{1, 2, 3}, nil, toks(0, 3)), &d); err != nil {
		t.Fatalf("at the bound: %v", err)
	}
	if err := a.Apply(stored([]uint64{4}, ptr(3), toks(50, 1)), &d); !errors.Is(err, ErrOverCapacity) {
		t.Fatalf("over the bound: %v", err)
	}
}

// BenchmarkApply64 translates 64-block BlockStored events (block size 16)
// and their removal, as the engine sends them.
func BenchmarkApply64(b *testing.B) {
	const n, size = 64, 16
	a := New(seed, size, 1<<20)
	tokens := make([]uint32, n*size)
	for i := range tokens {
		tokens[i] = uint32(i)
	}
	hashes := make([]uint64, n)
	st := &kvevents.Event{Kind: kvevents.KindStored, BlockHashes: hashes, TokenIDs: tokens, BlockSize: size}
	rm := &kvevents.Event{Kind: kvevents.KindRemoved, BlockHashes: hashes}
	var d Delta
	b.ReportAllocs()
	i := uint64(0)
	for b.Loop() {
		for j := range hashes {
			hashes[j] = i<<8 | uint64(j)
		}
		i++
		tokens[0] = uint32(i)
		d.Reset()
		if err := a.Apply(st, &d); err != nil {
			b.Fatal(err)
		}
		if err := a.Apply(rm, &d); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(2*n*b.N)/b.Elapsed().Seconds(), "blockevents/s")
}
