package state

import (
	"container/list"
	"math/rand/v2"
	"slices"
	"testing"
)

// lruHashes returns l's hashes, most recent first.
func lruHashes(l *blockLRU) []uint64 {
	var out []uint64
	l.Each(func(h uint64) { out = append(out, h) })
	return out
}

func TestBlockLRU(t *testing.T) {
	type op struct {
		kind string // "touch", "remove", "cap"
		arg  uint64
		// touch: want inserted / evicted; remove: want found (inserted).
		inserted bool
		evicted  []uint64 // touch: at most one; cap: in eviction order
	}
	tests := []struct {
		name     string
		capacity int
		ops      []op
		want     []uint64 // Each order, most recent first
	}{
		{
			name: "capacity bound evicts the least recently used", capacity: 3,
			ops: []op{
				{kind: "touch", arg: 1, inserted: true},
				{kind: "touch", arg: 2, inserted: true},
				{kind: "touch", arg: 3, inserted: true},
				{kind: "touch", arg: 4, inserted: true, evicted: []uint64{1}},
				{kind: "touch", arg: 5, inserted: true, evicted: []uint64{2}},
			},
			want: []uint64{5, 4, 3},
		},
		{
			name: "touch refreshes so the other entry is evicted", capacity: 3,
			ops: []op{
				{kind: "touch", arg: 1, inserted: true},
				{kind: "touch", arg: 2, inserted: true},
				{kind: "touch", arg: 3, inserted: true},
				{kind: "touch", arg: 1}, // refresh: 2 is now oldest
				{kind: "touch", arg: 4, inserted: true, evicted: []uint64{2}},
			},
			want: []uint64{4, 1, 3},
		},
		{
			name: "touching the most recent is a no-op", capacity: 2,
			ops: []op{
				{kind: "touch", arg: 7, inserted: true},
				{kind: "touch", arg: 7},
				{kind: "touch", arg: 7},
			},
			want: []uint64{7},
		},
		{
			name: "remove frees room without eviction", capacity: 2,
			ops: []op{
				{kind: "touch", arg: 1, inserted: true},
				{kind: "touch", arg: 2, inserted: true},
				{kind: "remove", arg: 1, inserted: true},
				{kind: "remove", arg: 1},
				{kind: "remove", arg: 99},
				{kind: "touch", arg: 3, inserted: true},
			},
			want: []uint64{3, 2},
		},
		{
			name: "remove the only entry then reinsert", capacity: 1,
			ops: []op{
				{kind: "touch", arg: 1, inserted: true},
				{kind: "remove", arg: 1, inserted: true},
				{kind: "touch", arg: 1, inserted: true},
				{kind: "touch", arg: 2, inserted: true, evicted: []uint64{1}},
			},
			want: []uint64{2},
		},
		{
			name: "capacity 0 is unbounded", capacity: 0,
			ops: []op{
				{kind: "touch", arg: 1, inserted: true},
				{kind: "touch", arg: 2, inserted: true},
				{kind: "touch", arg: 3, inserted: true},
				{kind: "touch", arg: 4, inserted: true},
			},
			want: []uint64{4, 3, 2, 1},
		},
		{
			name: "SetCapacity shrink evicts oldest first", capacity: 5,
			ops: []op{
				{kind: "touch", arg: 1, inserted: true},
				{kind: "touch", arg: 2, inserted: true},
				{kind: "touch", arg: 3, inserted: true},
				{kind: "touch", arg: 4, inserted: true},
				{kind: "touch", arg: 2},
				{kind: "cap", arg: 2, evicted: []uint64{1, 3}},
				{kind: "touch", arg: 5, inserted: true, evicted: []uint64{4}},
			},
			want: []uint64{5, 2},
		},
		{
			name: "SetCapacity grow keeps everything", capacity: 2,
			ops: []op{
				{kind: "touch", arg: 1, inserted: true},
				{kind: "touch", arg: 2, inserted: true},
				{kind: "cap", arg: 4},
				{kind: "touch", arg: 3, inserted: true},
				{kind: "touch", arg: 4, inserted: true},
				{kind: "touch", arg: 5, inserted: true, evicted: []uint64{1}},
			},
			want: []uint64{5, 4, 3, 2},
		},
		{
			name: "SetCapacity to 0 lifts the bound", capacity: 1,
			ops: []op{
				{kind: "touch", arg: 1, inserted: true},
				{kind: "cap", arg: 0},
				{kind: "touch", arg: 2, inserted: true},
				{kind: "touch", arg: 3, inserted: true},
			},
			want: []uint64{3, 2, 1},
		},
		{
			name: "hash 0 is an ordinary hash", capacity: 2,
			ops: []op{
				{kind: "touch", arg: 0, inserted: true},
				{kind: "touch", arg: 1, inserted: true},
				{kind: "touch", arg: 0},
				{kind: "touch", arg: 2, inserted: true, evicted: []uint64{1}},
			},
			want: []uint64{2, 0},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := newBlockLRU(tc.capacity)
			for i, o := range tc.ops {
				switch o.kind {
				case "touch":
					ins, ev, did := l.Touch(o.arg)
					var gotEv []uint64
					if did {
						gotEv = []uint64{ev}
					}
					if ins != o.inserted || !slices.Equal(gotEv, o.evicted) {
						t.Fatalf("op %d Touch(%d) = %v, %v; want %v, %v", i, o.arg, ins, gotEv, o.inserted, o.evicted)
					}
				case "remove":
					if got := l.Remove(o.arg); got != o.inserted {
						t.Fatalf("op %d Remove(%d) = %v, want %v", i, o.arg, got, o.inserted)
					}
				case "cap":
					var gotEv []uint64
					l.SetCapacity(int(o.arg), func(h uint64) { gotEv = append(gotEv, h) })
					if !slices.Equal(gotEv, o.evicted) {
						t.Fatalf("op %d SetCapacity(%d) evicted %v, want %v", i, o.arg, gotEv, o.evicted)
					}
				}
				if err := checkLRU(l); err != nil {
					t.Fatalf("after op %d: %v", i, err)
				}
			}
			if got := lruHashes(l); !slices.Equal(got, tc.want) {
				t.Errorf("Each = %v, want %v", got, tc.want)
			}
			if l.Len() != len(tc.want) {
				t.Errorf("Len = %d, want %d", l.Len(), len(tc.want))
			}
			for _, h := range tc.want {
				if !l.Contains(h) {
					t.Errorf("Contains(%d) = false", h)
				}
			}
		})
	}
}

// TestBlockLRUContainsDoesNotTouch: Contains leaves the order alone.
func TestBlockLRUContainsDoesNotTouch(t *testing.T) {
	l := newBlockLRU(2)
	l.Touch(1)
	l.Touch(2)
	if !l.Contains(1) || l.Contains(3) {
		t.Fatal("Contains wrong")
	}
	if _, ev, did := l.Touch(3); !did || ev != 1 {
		t.Fatalf("Touch(3) evicted %d (%v), want 1", ev, did)
	}
}

// TestBlockLRUFreeListReuse: removed and evicted nodes are reused, so the
// node slice never grows past the largest number of entries held at once.
func TestBlockLRUFreeListReuse(t *testing.T) {
	l := newBlockLRU(0)
	for h := range uint64(100) {
		l.Touch(h)
	}
	for h := range uint64(100) {
		l.Remove(h)
	}
	for round := range 10 {
		for h := range uint64(100) {
			l.Touch(1000*uint64(round+1) + h)
		}
		if len(l.nodes) != 101 {
			t.Fatalf("round %d: %d nodes, want 101", round, len(l.nodes))
		}
		for h := range uint64(100) {
			l.Remove(1000*uint64(round+1) + h)
		}
	}
	// Eviction reuses the evicted node.
	l.SetCapacity(10, func(uint64) {})
	for h := range uint64(10000) {
		l.Touch(h)
	}
	if len(l.nodes) != 101 || l.Len() != 10 {
		t.Fatalf("%d nodes, %d entries; want 101, 10", len(l.nodes), l.Len())
	}
	if err := checkLRU(l); err != nil {
		t.Fatal(err)
	}
}

// lruModel is the reference: a slice, most recent first.
type lruModel struct {
	capacity int
	items    []uint64
}

func (m *lruModel) touch(h uint64) (inserted bool, evicted uint64, didEvict bool) {
	if i := slices.Index(m.items, h); i >= 0 {
		m.items = slices.Delete(m.items, i, i+1)
		m.items = slices.Insert(m.items, 0, h)
		return false, 0, false
	}
	if m.capacity > 0 && len(m.items) >= m.capacity {
		evicted, didEvict = m.items[len(m.items)-1], true
		m.items = m.items[:len(m.items)-1]
	}
	m.items = slices.Insert(m.items, 0, h)
	return true, evicted, didEvict
}

func (m *lruModel) remove(h uint64) bool {
	i := slices.Index(m.items, h)
	if i < 0 {
		return false
	}
	m.items = slices.Delete(m.items, i, i+1)
	return true
}

func (m *lruModel) setCapacity(c int) []uint64 {
	m.capacity = c
	var ev []uint64
	for c > 0 && len(m.items) > c {
		ev = append(ev, m.items[len(m.items)-1])
		m.items = m.items[:len(m.items)-1]
	}
	return ev
}

// lruStep applies one op to both l and m and reports a mismatch. kind picks
// the op, arg its argument; peak tracks the most entries held at once.
func lruStep(t *testing.T, l *blockLRU, m *lruModel, step int, kind, arg byte, peak *int) {
	t.Helper()
	switch kind % 8 {
	case 0, 1, 2, 3, 4: // touch, the common op
		h := uint64(arg % 48)
		i1, e1, d1 := l.Touch(h)
		i2, e2, d2 := m.touch(h)
		if i1 != i2 || d1 != d2 || (d1 && e1 != e2) {
			t.Fatalf("step %d Touch(%d) = %v %d %v, model %v %d %v", step, h, i1, e1, d1, i2, e2, d2)
		}
	case 5, 6:
		h := uint64(arg % 48)
		if got, want := l.Remove(h), m.remove(h); got != want {
			t.Fatalf("step %d Remove(%d) = %v, model %v", step, h, got, want)
		}
	case 7:
		c := int(arg % 40) // 0 = unbounded
		var got []uint64
		l.SetCapacity(c, func(h uint64) { got = append(got, h) })
		if want := m.setCapacity(c); !slices.Equal(got, want) {
			t.Fatalf("step %d SetCapacity(%d) evicted %v, model %v", step, c, got, want)
		}
	}
	*peak = max(*peak, l.Len())
	if got := lruHashes(l); !slices.Equal(got, m.items) {
		t.Fatalf("step %d: Each = %v, model %v", step, got, m.items)
	}
	if l.capacity > 0 && l.Len() > l.capacity {
		t.Fatalf("step %d: %d entries over capacity %d", step, l.Len(), l.capacity)
	}
	// Free-list reuse: the node slice holds the sentinel plus the most
	// entries ever held at once, nothing more.
	if len(l.nodes)-1 != *peak {
		t.Fatalf("step %d: %d nodes for a peak of %d entries", step, len(l.nodes)-1, *peak)
	}
	if err := checkLRU(l); err != nil {
		t.Fatalf("step %d: %v", step, err)
	}
}

// TestBlockLRUModel drives a long seeded random op sequence against the
// slice model.
func TestBlockLRUModel(t *testing.T) {
	for seed := range uint64(4) {
		rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
		capacity := rng.IntN(20)
		l, m := newBlockLRU(capacity), &lruModel{capacity: capacity}
		peak := 0
		for step := range 5000 {
			lruStep(t, l, m, step, byte(rng.IntN(256)), byte(rng.IntN(256)), &peak)
		}
	}
}

func FuzzBlockLRU(f *testing.F) {
	f.Add(byte(3), []byte{0, 1, 0, 2, 0, 3, 0, 4, 5, 1, 7, 2, 0, 9})
	f.Add(byte(0), []byte{0, 0, 0, 0, 5, 0, 0, 0})
	f.Add(byte(1), []byte{7, 0, 0, 1, 0, 2, 7, 1, 6, 2})
	f.Fuzz(func(t *testing.T, capacity byte, ops []byte) {
		c := int(capacity % 40)
		l, m := newBlockLRU(c), &lruModel{capacity: c}
		peak := 0
		for i := 0; i+1 < len(ops); i += 2 {
			lruStep(t, l, m, i/2, ops[i], ops[i+1], &peak)
		}
	})
}

// TestBlockLRUScale runs enough entries through one LRU for its position
// table to double and split many times, with sequential hashes (0 included)
// and random ones, removals and refreshes, against a list-and-map model,
// checking the whole structure at intervals.
func TestBlockLRUScale(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 9))
	for _, capacity := range []int{0, 5000} {
		l := newBlockLRU(capacity)
		model := list.New()
		at := map[uint64]*list.Element{}
		touch := func(h uint64) {
			ins, ev, did := l.Touch(h)
			e, ok := at[h]
			if ins == ok {
				t.Fatalf("Touch(%#x) inserted %v, model holds %v", h, ins, ok)
			}
			if ok {
				model.MoveToFront(e)
			} else {
				if capacity > 0 && model.Len() >= capacity {
					old := model.Remove(model.Back()).(uint64)
					delete(at, old)
					if !did || ev != old {
						t.Fatalf("Touch(%#x) evicted %#x (%v), model %#x", h, ev, did, old)
					}
				} else if did {
					t.Fatalf("Touch(%#x) evicted %#x, model nothing", h, ev)
				}
				at[h] = model.PushFront(h)
			}
		}
		var hashes []uint64
		for i := range uint64(15000) {
			hashes = append(hashes, i, rng.Uint64())
		}
		for step := range 4 {
			for _, h := range hashes {
				touch(h)
			}
			for _, i := range rng.Perm(len(hashes))[:len(hashes)/2] {
				h := hashes[i]
				_, ok := at[h]
				if got := l.Remove(h); got != ok {
					t.Fatalf("Remove(%#x) = %v, model %v", h, got, ok)
				}
				if ok {
					model.Remove(at[h])
					delete(at, h)
				}
			}
			for range 5000 {
				touch(hashes[rng.IntN(len(hashes))])
			}
			if err := checkLRU(l); err != nil {
				t.Fatalf("capacity %d step %d: %v", capacity, step, err)
			}
			if capacity == 0 && l.pos.depth == 0 {
				t.Fatalf("step %d: %d entries in one table", step, l.Len())
			}
			var want []uint64
			for e := model.Front(); e != nil; e = e.Next() {
				want = append(want, e.Value.(uint64))
			}
			if got := lruHashes(l); !slices.Equal(got, want) {
				t.Fatalf("capacity %d step %d: order differs from the model", capacity, step)
			}
		}
	}
}

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
