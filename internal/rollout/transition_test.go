package rollout

import (
	"errors"
	"maps"
	"testing"
	"time"
)

var t0 = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

func threeSteps() []Step {
	return []Step{
		{map[string]float64{"a": 2, "b": 1}, time.Minute},
		{map[string]float64{"a": 1, "b": 1}, 2 * time.Minute},
		{map[string]float64{"a": 0, "b": 1}, 3 * time.Minute},
	}
}

func TestRampLifecycle(t *testing.T) {
	r := New(1, map[string]float64{"a": 1}, threeSteps(), AutoHold{}, t0, "alice")
	if r.State != Running || !r.NextAt.Equal(t0.Add(time.Minute)) {
		t.Fatalf("new ramp = %v next %v", r.State, r.NextAt)
	}
	if got := r.Remains(t0); got != 6*time.Minute {
		t.Errorf("Remains at start = %v, want 6m", got)
	}
	if r.Due(t0.Add(59 * time.Second)) {
		t.Error("due before its time")
	}
	// Step 1, one second late: step 2 is due 2 min after that, not after the plan's time.
	at := t0.Add(61 * time.Second)
	r, w, err := r.Step(at)
	if err != nil || !maps.Equal(w, map[string]float64{"a": 2, "b": 1}) || r.Applied != 1 {
		t.Fatalf("Step = %v %v %v", r.Applied, w, err)
	}
	if !r.NextAt.Equal(at.Add(2 * time.Minute)) {
		t.Errorf("NextAt = %v, want %v", r.NextAt, at.Add(2*time.Minute))
	}
	// Pause 30 s into the 2 min wait: 90 s remain, kept across the pause.
	r, err = r.Pause(at.Add(30*time.Second), "paused by bob")
	if err != nil || r.State != Paused || r.Remaining != 90*time.Second {
		t.Fatalf("Pause = %v %v %v", r.State, r.Remaining, err)
	}
	if r.Due(at.Add(time.Hour)) {
		t.Error("a paused ramp is due")
	}
	if _, _, err := r.Step(at.Add(time.Hour)); !errors.Is(err, ErrNotActive) {
		t.Errorf("Step of a paused ramp: %v", err)
	}
	if got := r.Remains(at.Add(time.Hour)); got != 90*time.Second+3*time.Minute {
		t.Errorf("Remains while paused = %v", got)
	}
	resumed := at.Add(time.Hour)
	r, err = r.Resume(resumed, "resumed by bob")
	if err != nil || !r.NextAt.Equal(resumed.Add(90*time.Second)) {
		t.Fatalf("Resume = %v %v", r.NextAt, err)
	}
	r, _, _ = r.Step(r.NextAt)
	last := r.NextAt
	r, w, err = r.Step(last)
	if err != nil || r.State != Done || r.Applied != 3 || !maps.Equal(w, map[string]float64{"a": 0, "b": 1}) {
		t.Fatalf("last Step = %v %d %v %v", r.State, r.Applied, w, err)
	}
	if _, err := r.Abort(last, "x"); !errors.Is(err, ErrNotActive) {
		t.Errorf("Abort of a done ramp: %v", err)
	}
}

func TestRampAbortKeepsCurrent(t *testing.T) {
	r := New(7, map[string]float64{"a": 1}, threeSteps(), AutoHold{}, t0, "alice")
	if !maps.Equal(r.Current(), map[string]float64{"a": 1}) {
		t.Errorf("Current before any step = %v", r.Current())
	}
	r, _, _ = r.Step(t0.Add(time.Minute))
	r, err := r.Abort(t0.Add(90*time.Second), "aborted by carol")
	if err != nil || r.State != Aborted || r.Reason != "aborted by carol" {
		t.Fatalf("Abort = %v %v", r.State, err)
	}
	if !maps.Equal(r.Current(), map[string]float64{"a": 2, "b": 1}) {
		t.Errorf("Current after abort = %v", r.Current())
	}
	if _, err := r.Resume(t0, "x"); !errors.Is(err, ErrNotActive) {
		t.Errorf("Resume of an aborted ramp: %v", err)
	}
}

func TestRampValueSemantics(t *testing.T) {
	steps := threeSteps()
	r := New(1, map[string]float64{"a": 1}, steps, AutoHold{}, t0, "alice")
	steps[0].Weights["a"] = 99
	next, w, _ := r.Step(t0.Add(time.Minute))
	w["a"] = 42
	if r.Applied != 0 || r.Steps[0].Weights["a"] != 2 || next.Steps[0].Weights["a"] != 2 {
		t.Errorf("ramp shares memory with its inputs or results: %v / %v", r.Steps[0], next.Steps[0])
	}
}

func TestParseState(t *testing.T) {
	for _, s := range []State{Running, Paused, Done, Aborted} {
		got, err := ParseState(s.String())
		if err != nil || got != s {
			t.Errorf("ParseState(%q) = %v, %v", s.String(), got, err)
		}
	}
	if _, err := ParseState("stopped"); err == nil {
		t.Error("ParseState(stopped) succeeded")
	}
}
