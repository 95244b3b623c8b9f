package state

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// touchAllRef is the reference TouchAll: Touch from the last hash down,
// keeping the index in step as Pool.store does.
func touchAllRef(l *blockLRU, x *prefixIndex, slot uint32, hashes []uint64) {
	for k := len(hashes) - 1; k >= 0; k-- {
		ins, ev, did := l.Touch(hashes[k])
		if did {
			x.remove(ev, slot)
		}
		if ins {
			x.add(hashes[k], slot)
		}
	}
}

// lruPair is an LRU with its index, built twice by the same operations.
type lruPair struct {
	l *blockLRU
	x prefixIndex
}

// TestBlockLRUTouchAll: whenever TouchAll applies, it leaves the LRU (order,
// contents, structure) and the index exactly as touching one hash at a time
// from the last would; when it declines, it changed nothing. Requests mix
// cached runs, runs cached in another order, absent hashes and duplicates.
func TestBlockLRUTouchAll(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	applied, declined := 0, 0
	for trial := range 400 {
		capacity := []int{0, 0, 8, 30, 64, 200}[rng.IntN(6)]
		universe := uint64(10 + rng.IntN(300))
		var a, b lruPair
		for _, p := range []*lruPair{&a, &b} {
			p.l, p.x = newBlockLRU(capacity), newIndexFor(4)
		}
		var nodes []uint32
		for step := range 30 {
			// A request: runs of hashes, some repeated, some absent.
			var req []uint64
			for range 1 + rng.IntN(4) {
				start, n := uint64(rng.IntN(int(universe))), rng.IntN(40)
				for k := range uint64(n) {
					req = append(req, (start+k)%universe)
				}
			}
			if rng.IntN(3) == 0 && len(req) > 0 {
				req = append(req, req[rng.IntN(len(req))])
			}
			if rng.IntN(4) == 0 { // shuffled: cached, but not linked in order
				rng.Shuffle(len(req), func(i, j int) { req[i], req[j] = req[j], req[i] })
			}
			before := lruHashes(a.l)
			var ok bool
			ok, nodes = a.l.TouchAll(req, nodes, &a.x, 2)
			if ok {
				applied++
			} else {
				declined++
				if got := lruHashes(a.l); !slices.Equal(got, before) {
					t.Fatalf("trial %d step %d: declined TouchAll changed the LRU", trial, step)
				}
				touchAllRef(a.l, &a.x, 2, req)
			}
			touchAllRef(b.l, &b.x, 2, req)
			if got, want := lruHashes(a.l), lruHashes(b.l); !slices.Equal(got, want) {
				t.Fatalf("trial %d step %d (cap %d, applied %v): order\n got %v\nwant %v\nreq %v", trial, step, capacity, ok, got, want, req)
			}
			if err := checkLRU(a.l); err != nil {
				t.Fatalf("trial %d step %d: %v", trial, step, err)
			}
			if err := a.x.check(); err != nil {
				t.Fatalf("trial %d step %d: %v", trial, step, err)
			}
			va, vb := a.x.view(), b.x.view()
			if len(va) != len(vb) || a.x.pairs != b.x.pairs {
				t.Fatalf("trial %d step %d: index %d blocks %d pairs, want %d %d", trial, step, len(va), a.x.pairs, len(vb), b.x.pairs)
			}
			for h := range vb {
				if va[h] == nil || !a.x.holds(h, 2) {
					t.Fatalf("trial %d step %d: index lacks %d", trial, step, h)
				}
			}
		}
	}
	if applied < 1000 || declined < 100 {
		t.Fatalf("coverage: TouchAll applied %d times, declined %d", applied, declined)
	}
}

// FuzzBlockLRUTouchAll: ops bytes build an LRU (touches and removals), then
// each request byte string goes through TouchAll on one copy and the
// reference on another; they must agree.
func FuzzBlockLRUTouchAll(f *testing.F) {
	f.Add(byte(0), []byte{1, 2, 3, 4}, []byte{1, 2, 3, 9, 1})
	f.Add(byte(5), []byte{1, 2, 3, 4, 5, 6}, []byte{6, 5, 4, 3, 2, 1, 0})
	f.Add(byte(3), []byte{7, 7, 8}, []byte{7, 8, 7, 8})
	f.Fuzz(func(t *testing.T, capacity byte, ops, req []byte) {
		c := int(capacity % 20)
		var a, b lruPair
		for _, p := range []*lruPair{&a, &b} {
			p.l, p.x = newBlockLRU(c), newIndexFor(1)
			for _, o := range ops {
				if o&128 != 0 {
					if p.l.Remove(uint64(o & 31)) {
						p.x.remove(uint64(o&31), 0)
					}
				} else {
					touchAllRef(p.l, &p.x, 0, []uint64{uint64(o & 31)})
				}
			}
		}
		hashes := make([]uint64, len(req))
		for i, r := range req {
			hashes[i] = uint64(r & 31)
		}
		if ok, _ := a.l.TouchAll(hashes, nil, &a.x, 0); !ok {
			touchAllRef(a.l, &a.x, 0, hashes)
		}
		touchAllRef(b.l, &b.x, 0, hashes)
		if got, want := lruHashes(a.l), lruHashes(b.l); !slices.Equal(got, want) {
			t.Fatalf("order %v, want %v", got, want)
		}
		if err := checkLRU(a.l); err != nil {
			t.Fatal(err)
		}
		if a.x.pairs != b.x.pairs || a.x.check() != nil {
			t.Fatalf("index: %d pairs, want %d (%v)", a.x.pairs, b.x.pairs, a.x.check())
		}
	})
}
