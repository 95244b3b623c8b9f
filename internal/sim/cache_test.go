package sim

import (
	"container/heap"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func TestCacheLRU(t *testing.T) {
	c := NewCache(3)
	for _, h := range []uint64{1, 2, 3} {
		if ins, _, ev := c.Insert(h); !ins || ev {
			t.Fatalf("Insert(%d): inserted %v evicted %v", h, ins, ev)
		}
	}
	c.Touch(1) // order now 1 3 2
	ins, ev, did := c.Insert(4)
	if !ins || !did || ev != 2 {
		t.Fatalf("Insert(4) evicted %d (%v), want 2", ev, did)
	}
	var order []uint64
	c.Each(func(h uint64) { order = append(order, h) })
	if !slices.Equal(order, []uint64{4, 1, 3}) {
		t.Fatalf("order %v, want [4 1 3]", order)
	}
	if got := c.Match([]uint64{4, 1, 9, 3}); got != 2 {
		t.Fatalf("Match = %d, want 2", got)
	}
	if ins, _, did := c.Insert(1); ins || did {
		t.Fatal("re-inserting a held block inserted or evicted")
	}
}

// TestCacheCapacityProperty drives caches of several sizes with random
// operations and checks, after each, the size bound and that the held set
// equals a simple model's.
func TestCacheCapacityProperty(t *testing.T) {
	for _, capacity := range []int{1, 2, 7, 64} {
		rng := rand.New(rand.NewPCG(uint64(capacity), 1))
		c := NewCache(capacity)
		var model []uint64 // most recent first
		for range 5000 {
			h := rng.Uint64N(uint64(3 * capacity))
			if rng.IntN(3) == 0 {
				if c.Touch(h) != slices.Contains(model, h) {
					t.Fatalf("cap %d: Touch(%d) disagrees with the model", capacity, h)
				}
				if i := slices.Index(model, h); i >= 0 {
					model = slices.Insert(slices.Delete(model, i, i+1), 0, h)
				}
			} else {
				ins, ev, did := c.Insert(h)
				i := slices.Index(model, h)
				if ins != (i < 0) {
					t.Fatalf("cap %d: Insert(%d) inserted = %v", capacity, h, ins)
				}
				if i >= 0 {
					model = slices.Delete(model, i, i+1)
				} else if len(model) == capacity {
					if !did || ev != model[len(model)-1] {
						t.Fatalf("cap %d: evicted %d (%v), want %d", capacity, ev, did, model[len(model)-1])
					}
					model = model[:len(model)-1]
				}
				model = slices.Insert(model, 0, h)
			}
			if c.Len() > c.Capacity() || c.Len() != len(model) {
				t.Fatalf("cap %d: %d blocks, model %d", capacity, c.Len(), len(model))
			}
		}
		var got []uint64
		c.Each(func(h uint64) { got = append(got, h) })
		if !slices.Equal(got, model) {
			t.Fatalf("cap %d: order %v, model %v", capacity, got, model)
		}
	}
}

func TestEventLogCoalesces(t *testing.T) {
	type op struct {
		h      uint64
		stored bool
	}
	for _, tc := range []struct {
		name            string
		ops             []op
		stored, removed []uint64
	}{
		{"plain", []op{{1, true}, {2, true}, {3, false}}, []uint64{1, 2}, []uint64{3}},
		{"stored then evicted cancels", []op{{1, true}, {2, true}, {1, false}}, []uint64{2}, nil},
		{"evicted then stored again cancels", []op{{5, false}, {5, true}}, nil, nil},
		{"three ops leave one", []op{{5, false}, {5, true}, {5, false}}, nil, []uint64{5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var l eventLog
			for _, o := range tc.ops {
				l.add(o.h, o.stored, true)
			}
			s, r := l.drain(nil, nil)
			if !slices.Equal(s, tc.stored) || !slices.Equal(r, tc.removed) || l.pending() != 0 {
				t.Fatalf("stored %v removed %v, want %v %v", s, r, tc.stored, tc.removed)
			}
		})
	}
}

func TestEventQueueOrder(t *testing.T) {
	var q eventQueue
	for i, at := range []time.Duration{5, 1, 5, 3, 1} {
		q.push(event{at: at, inst: int32(i)})
	}
	var got []int32
	for q.Len() > 0 {
		got = append(got, q.pop().inst)
	}
	if !slices.Equal(got, []int32{1, 4, 3, 0, 2}) {
		t.Fatalf("order %v, want by time then insertion: [1 4 3 0 2]", got)
	}
	heap.Init(&q) // empty heap stays valid
	if _, ok := q.peek(); ok {
		t.Fatal("peek on an empty queue")
	}
}
