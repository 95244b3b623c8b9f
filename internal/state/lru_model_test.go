package state

import (
	"container/list"
	"math/rand/v2"
	"slices"
	"testing"
)

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
