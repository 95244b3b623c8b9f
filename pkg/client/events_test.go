package client

import (
	"slices"
	"testing"
)

func seq(from, n int) []uint64 {
	out := make([]uint64, n)
	for i := range out {
		out[i] = uint64(from + i)
	}
	return out
}

// TestBatchSplit: every part holds at most limit events, the parts hold the
// batch's events exactly once in order, and only the first part clears.
func TestBatchSplit(t *testing.T) {
	for _, tc := range []struct {
		name             string
		cleared          bool
		removed, stored  int
		limit, wantParts int
	}{
		{"empty", false, 0, 0, 10, 1},
		{"empty clear", true, 0, 0, 10, 1},
		{"under", false, 3, 4, 10, 1},
		{"exactly", true, 4, 6, 10, 1},
		{"one over", false, 5, 6, 10, 2},
		{"removed fill a part", false, 10, 1, 10, 2},
		{"many", true, 25, 37, 10, 7},
		{"limit 1", true, 2, 2, 1, 4},
		{"server limit", true, 0, 2*MaxEventsPerMessage + 1, MaxEventsPerMessage, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := batch{cleared: tc.cleared, removed: seq(0, tc.removed), stored: seq(1000000, tc.stored)}
			parts := b.split(tc.limit)
			if len(parts) != tc.wantParts {
				t.Fatalf("%d parts, want %d", len(parts), tc.wantParts)
			}
			var removed, stored []uint64
			for i, p := range parts {
				if p.events() > tc.limit {
					t.Errorf("part %d has %d events, limit %d", i, p.events(), tc.limit)
				}
				if p.cleared != (i == 0 && tc.cleared) {
					t.Errorf("part %d cleared = %v", i, p.cleared)
				}
				if i < len(parts)-1 && p.events() != tc.limit {
					t.Errorf("part %d of %d has %d events; only the last may be short", i, len(parts), p.events())
				}
				removed = append(removed, p.removed...)
				stored = append(stored, p.stored...)
			}
			if !slices.Equal(removed, b.removed) || !slices.Equal(stored, b.stored) {
				t.Errorf("parts hold removed %v stored %v, want %v and %v", removed, stored, b.removed, b.stored)
			}
		})
	}
}

// TestCacheBook: pending events coalesce to each block's last event,
// clears drop what came before, nothing queues without a stream, and the
// tracked set follows every event.
func TestCacheBook(t *testing.T) {
	type op struct {
		kind string // "s" stored, "r" removed, "c" cleared, "begin", "end"
		h    []uint64
	}
	s := func(h ...uint64) op { return op{"s", h} }
	r := func(h ...uint64) op { return op{"r", h} }
	for _, tc := range []struct {
		name                 string
		ops                  []op
		wantCleared          bool
		wantStored, wantRem  []uint64
		wantHeld, wantSnap   []uint64
		snapshotAfterOpIndex int // -1: none
	}{
		{"store then remove", []op{{"begin", nil}, s(1, 2), r(1)}, false, []uint64{2}, []uint64{1}, []uint64{2}, nil, -1},
		{"remove then store", []op{{"begin", nil}, r(1), s(1)}, false, []uint64{1}, nil, []uint64{1}, nil, -1},
		{"clear drops earlier events", []op{{"begin", nil}, s(1, 2), {"c", nil}, s(3)}, true, []uint64{3}, nil, []uint64{3}, nil, -1},
		{"nothing queued without a stream", []op{s(1, 2), r(2)}, false, nil, nil, []uint64{1}, nil, -1},
		{"begin snapshots held, queues later", []op{s(1, 2), {"begin", nil}, s(3)}, false, []uint64{3}, nil,
			[]uint64{1, 2, 3}, []uint64{1, 2}, 1},
		{"end drops pending", []op{{"begin", nil}, s(1), {"end", nil}}, false, nil, nil, []uint64{1}, nil, -1},
		{"clear without a stream", []op{s(1), {"c", nil}}, false, nil, nil, nil, nil, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newCacheBook(true)
			var snap []uint64
			for i, o := range tc.ops {
				switch o.kind {
				case "s", "r":
					for _, h := range o.h {
						b.event(h, o.kind == "s")
					}
				case "c":
					b.clear()
				case "begin":
					got := b.begin()
					if i == tc.snapshotAfterOpIndex {
						snap = got
					}
				case "end":
					b.end()
				}
			}
			got := b.take()
			slices.Sort(snap)
			var held []uint64
			for h := range b.held {
				held = append(held, h)
			}
			slices.Sort(held)
			if got.cleared != tc.wantCleared || !slices.Equal(got.stored, tc.wantStored) ||
				!slices.Equal(got.removed, tc.wantRem) || !slices.Equal(held, tc.wantHeld) || !slices.Equal(snap, tc.wantSnap) {
				t.Errorf("pending %+v, held %v, snapshot %v; want cleared %v stored %v removed %v held %v snapshot %v",
					got, held, snap, tc.wantCleared, tc.wantStored, tc.wantRem, tc.wantHeld, tc.wantSnap)
			}
			if b.pending() != 0 {
				t.Errorf("%d events pending after take", b.pending())
			}
		})
	}
}

// TestJitteredBackoff: the first retry comes after MinBackoff ± 50%, the
// later ones with full jitter up to MinBackoff·2^n, capped at MaxBackoff.
func TestJitteredBackoff(t *testing.T) {
	for _, tc := range []struct {
		n          int
		floor, top int64
	}{{0, 50, 150}, {1, 0, 200}, {3, 0, 800}, {7, 0, 10000}, {100, 0, 10000}} {
		for range 200 {
			d := jitteredBackoff(100, 10000, tc.n)
			if int64(d) < tc.floor || int64(d) > tc.top {
				t.Fatalf("attempt %d: %v outside [%d, %d]", tc.n, d, tc.floor, tc.top)
			}
		}
	}
	if d := jitteredBackoff(100, 60, 0); d > 60 {
		t.Errorf("first retry %v above MaxBackoff 60", d)
	}
}
