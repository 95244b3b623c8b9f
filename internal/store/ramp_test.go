package store

import (
	"errors"
	"maps"
	"testing"
	"time"

	"github.com/prefixroute/prefixroute/internal/rollout"
)

func twoSteps() []rollout.Step {
	return []rollout.Step{
		{Weights: map[string]float64{"a": 0.5, "b": 0.5}, After: time.Minute},
		{Weights: map[string]float64{"a": 0, "b": 1}, After: time.Minute},
	}
}

func TestRampSurvivesReopen(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, Options{Now: testClock()})
	if _, err := s.SetWeights("chat", map[string]float64{"a": 1}, 0, "op"); err != nil {
		t.Fatal(err)
	}
	pc, err := s.StartRamp("chat", map[string]float64{"a": 1}, twoSteps(), rollout.AutoHold{MinHeadroomPct: 20}, 1, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if pc.Ramp.ID != 1 || pc.Ramp.State != rollout.Running || pc.WeightsVersion != 1 {
		t.Fatalf("after StartRamp: %+v", pc.Ramp)
	}
	// A manual change is refused while the ramp owns the weights.
	if _, err := s.SetWeights("chat", map[string]float64{"a": 3}, 0, "bob"); !errors.Is(err, ErrRampActive) {
		t.Fatalf("SetWeights during a ramp: %v", err)
	}
	if _, err := s.StartRamp("chat", nil, twoSteps(), rollout.AutoHold{}, 0, "bob"); !errors.Is(err, ErrRampActive) {
		t.Fatalf("second StartRamp: %v", err)
	}
	pc, err = s.StepRamp("chat", 1, 0, "ramp")
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(pc.Weights, map[string]float64{"a": 0.5, "b": 0.5}) || pc.WeightsVersion != 2 || pc.Ramp.Applied != 1 {
		t.Fatalf("after step 1: %v v%d applied %d", pc.Weights, pc.WeightsVersion, pc.Ramp.Applied)
	}
	// The same step again (another replica, a retried tick) is refused.
	if _, err := s.StepRamp("chat", 1, 0, "ramp"); !errors.Is(err, ErrRampNotActive) {
		t.Fatalf("step applied twice: %v", err)
	}
	want := pc
	closeStore(t, s)

	s = openStore(t, dir, Options{Now: testClock()})
	got, _ := s.Pool("chat")
	if got.Ramp == nil || got.Ramp.Applied != 1 || got.Ramp.State != rollout.Running ||
		!got.Ramp.NextAt.Equal(want.Ramp.NextAt) || got.Ramp.AutoHold.MinHeadroomPct != 20 ||
		!maps.Equal(got.Weights, want.Weights) || got.WeightsVersion != 2 {
		t.Fatalf("after reopen: %+v weights %v, want %+v", got.Ramp, got.Weights, want.Ramp)
	}
	if _, err := s.UpdateRamp("chat", 0, RampPause, "paused by bob", "bob"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.StepRamp("chat", 1, 1, "ramp"); !errors.Is(err, ErrRampNotActive) {
		t.Fatalf("step of a paused ramp: %v", err)
	}
	pc, err = s.UpdateRamp("chat", 1, RampAbort, "aborted by bob", "bob")
	if err != nil || pc.Ramp.State != rollout.Aborted || !maps.Equal(pc.Weights, want.Weights) {
		t.Fatalf("abort: %v %+v %v", err, pc.Ramp, pc.Weights)
	}
	// Once it ended, manual changes work again and a new ramp gets id 2.
	if _, err := s.SetWeights("chat", map[string]float64{"a": 1, "b": 1}, 0, "bob"); err != nil {
		t.Fatal(err)
	}
	pc, err = s.StartRamp("chat", map[string]float64{"a": 1, "b": 1}, twoSteps(), rollout.AutoHold{}, 0, "bob")
	if err != nil || pc.Ramp.ID != 2 {
		t.Fatalf("second ramp: %v %+v", err, pc.Ramp)
	}

	var events []string
	for _, l := range auditLines(t, s) {
		if r, ok := l["ramp"].(map[string]any); ok {
			events = append(events, l["kind"].(string)+":"+r["event"].(string))
		}
	}
	wantEvents := []string{"ramp:start", "weights:step", "ramp:pause", "ramp:abort", "ramp:start"}
	if !slicesEqual(events, wantEvents) {
		t.Errorf("audit ramp events = %v, want %v", events, wantEvents)
	}
}

func TestRampLastStepIsDone(t *testing.T) {
	s := openStore(t, t.TempDir(), Options{Now: testClock()})
	steps := twoSteps()
	if _, err := s.StartRamp("chat", map[string]float64{"a": 1}, steps, rollout.AutoHold{}, 0, "alice"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.StepRamp("chat", 1, 0, "ramp"); err != nil {
		t.Fatal(err)
	}
	pc, err := s.StepRamp("chat", 1, 1, "ramp")
	if err != nil || pc.Ramp.State != rollout.Done || !maps.Equal(pc.Weights, steps[1].Weights) {
		t.Fatalf("last step: %v %+v", err, pc.Ramp)
	}
	if _, err := s.UpdateRamp("chat", 0, RampPause, "x", "bob"); !errors.Is(err, ErrRampNotActive) {
		t.Errorf("pause of a done ramp: %v", err)
	}
}

func TestRampErrors(t *testing.T) {
	s := openStore(t, t.TempDir(), Options{Now: testClock()})
	if _, err := s.UpdateRamp("chat", 0, RampPause, "x", "bob"); !errors.Is(err, ErrNoRamp) {
		t.Errorf("pause without a ramp: %v", err)
	}
	bad := []rollout.Step{{Weights: map[string]float64{"a": -1}, After: time.Second}}
	if _, err := s.StartRamp("chat", nil, bad, rollout.AutoHold{}, 0, "x"); !errors.Is(err, ErrInvalidWeights) {
		t.Errorf("negative weight in a step: %v", err)
	}
	if _, err := s.StartRamp("chat", nil, nil, rollout.AutoHold{}, 0, "x"); !errors.Is(err, ErrInvalidRamp) {
		t.Errorf("no steps: %v", err)
	}
	if _, err := s.StartRamp("chat", nil, twoSteps(), rollout.AutoHold{MinHeadroomPct: 101}, 0, "x"); !errors.Is(err, ErrInvalidRamp) {
		t.Errorf("headroom 101%%: %v", err)
	}
	if _, err := s.StartRamp("chat", nil, twoSteps(), rollout.AutoHold{}, 5, "x"); !errors.Is(err, ErrVersionMismatch) {
		t.Errorf("stale expected version: %v", err)
	}
	if _, ok := s.Pool("chat"); ok {
		t.Error("a refused ramp left a pool behind")
	}
}

func slicesEqual(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
