package state

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

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
