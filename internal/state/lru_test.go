package state

import (
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
