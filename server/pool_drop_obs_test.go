package server

import (
	"testing"
	"time"

	"go.opentelemetry.io/otel/metric/noop"

	"github.com/prefixroute/prefixroute/internal/state"
)

// TestDropPoolReturnsHistoryRings: dropping a pool's observations gives its
// console history rings (the pool's failure ring and one per deployment)
// back to the budget, and forgets the pool's counters.
func TestDropPoolReturnsHistoryRings(t *testing.T) {
	reg := state.NewRegistry(state.Limits{})
	if _, err := reg.Ensure("a"); err != nil {
		t.Fatal(err)
	}
	o, err := newObserver(noop.NewMeterProvider().Meter("test"), reg, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	p := o.pool("a")
	p.dep("x")
	p.dep("y")
	if n := o.rings.n.Load(); n != 3 {
		t.Fatalf("%d rings taken, want 3", n)
	}
	o.dropPool("a")
	o.dropPool("never-seen")
	if n := o.rings.n.Load(); n != 0 {
		t.Errorf("%d rings taken after the drop, want 0", n)
	}
	if o.lookup("a") != nil {
		t.Error("the dropped pool's observations are still there")
	}
	var nilObs *observer
	nilObs.dropPool("a") // a Server without a Daemon records nothing
}
