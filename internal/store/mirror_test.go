package store

import (
	"errors"
	"reflect"
	"testing"

	"github.com/prefixroute/prefixroute/internal/rollout"
	"github.com/prefixroute/prefixroute/scheduler"
)

// TestMirror: a configuration decided by one store, encoded as a cluster
// bucket holds it, is adopted by another exactly; adopting it again writes
// nothing.
func TestMirror(t *testing.T) {
	a := openStore(t, t.TempDir(), Options{})
	b := openStore(t, t.TempDir(), Options{})
	if _, err := a.SetWeights("chat", map[string]float64{"a": 1}, 0, "op"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.SetPolicy("chat", scheduler.DefaultPolicy(), "op"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.StartRamp("chat", map[string]float64{"a": 1}, twoSteps(), rollout.AutoHold{MinHeadroomPct: 10, From: "a", To: "b"}, 0, "op"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.StepRamp("chat", 1, 0, "ramp"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.UpdateRamp("chat", 1, RampPause, "paused by op", "op"); err != nil {
		t.Fatal(err)
	}
	pc, ok := a.Pool("chat")
	if !ok {
		t.Fatal("pool chat missing after the edits")
	}

	data, err := EncodePoolConfig(pc)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodePoolConfig(data)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, pc) {
		t.Fatalf("round trip changed the configuration:\n got %+v\nwant %+v", got, pc)
	}
	changed, err := b.Mirror("chat", got, "replica a")
	if err != nil || !changed {
		t.Fatalf("Mirror = %v, %v", changed, err)
	}
	if again, err := b.Mirror("chat", got, "replica a"); err != nil || again {
		t.Fatalf("second Mirror = %v, %v; want a no-op", again, err)
	}
	if n := len(auditLines(t, b)); n != 1 {
		t.Errorf("b's audit log has %d records, want 1", n)
	}
	mirrored, _ := b.Pool("chat")
	if !reflect.DeepEqual(mirrored, pc) {
		t.Errorf("mirrored %+v, want %+v", mirrored, pc)
	}
	if _, err := DecodePoolConfig([]byte(`{"weights": {"a": -1}}`)); !errors.Is(err, ErrCorruptState) {
		t.Errorf("bad value: %v", err)
	}
	if _, err := DecodePoolConfig([]byte(`{"shards": 3}`)); !errors.Is(err, ErrCorruptState) {
		t.Errorf("unknown field: %v", err)
	}
}
