package flowq

import (
	"fmt"
	"testing"

	"go.opentelemetry.io/otel/metric"
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

// TestObserverAttrsBounded: the observer's cache of attribute options
// stops at maxCachedAttrs, and an option past it is still built.
func TestObserverAttrsBounded(t *testing.T) {
	o := &observer{attrs: make(map[[2]string]metric.MeasurementOption)}
	for i := range maxCachedAttrs + 10 {
		if o.attr(fmt.Sprintf("p%d", i), "result", "dispatched") == nil {
			t.Fatalf("no attribute option for pool %d", i)
		}
	}
	if len(o.attrs) != maxCachedAttrs {
		t.Fatalf("%d options cached, want %d", len(o.attrs), maxCachedAttrs)
	}
}
