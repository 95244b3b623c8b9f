package flowq

import (
	"fmt"
	"testing"
)

// TestDroppedPoolsBounded: the counters of dropped idle queues are kept
// for MaxDroppedPools pools and no more; a pool already kept goes on
// adding up.
func TestDroppedPoolsBounded(t *testing.T) {
	r := NewRooms(nil)
	for i := range MaxDroppedPools + 1 {
		r.queue(fmt.Sprintf("p%d", i), big)
	}
	r.KickAll()
	if got := len(r.dropped); got != MaxDroppedPools {
		t.Fatalf("after dropping %d idle queues, %d pools' counters kept, want %d", MaxDroppedPools+1, got, MaxDroppedPools)
	}
	if len(r.pools) != 0 {
		t.Fatalf("%d queues left, want every idle one dropped", len(r.pools))
	}
	// A kept pool queues again and is dropped again: still kept.
	r.queue("p0", big).stats.Enqueued = 2
	r.KickAll()
	if st, ok := r.dropped["p0"]; !ok || st.Enqueued != 2 || len(r.dropped) != MaxDroppedPools {
		t.Fatalf("p0 kept %v (%+v), %d pools kept; want kept with Enqueued 2, %d pools", ok, st, len(r.dropped), MaxDroppedPools)
	}
}
