package rollout

import (
	"fmt"
	"maps"
	"time"
)

// New returns a running ramp with the given steps, started at now by
// caller from the weights start. Its first step is due steps[0].After from
// now. The steps must have passed CheckSteps (Plan's always do).
func New(id uint64, start map[string]float64, steps []Step, hold AutoHold, now time.Time, caller string) Ramp {
	r := Ramp{
		ID: id, State: Running, Start: maps.Clone(start), Steps: steps, AutoHold: hold,
		StartedAt: now, StartedBy: caller, UpdatedAt: now,
	}
	r = r.Clone()
	r.NextAt = now.Add(steps[0].After)
	return r
}

// Due reports whether r's next step should be applied at now.
func (r *Ramp) Due(now time.Time) bool {
	return r.State == Running && r.Applied < len(r.Steps) && !now.Before(r.NextAt)
}

// Step returns r with its next step applied at now, and the weights that
// step sets. The ramp is Done after its last step; else the next step is due
// its After from now. It fails with ErrNotActive unless r is Running with a
// step left.
func (r Ramp) Step(now time.Time) (Ramp, map[string]float64, error) {
	if r.State != Running || r.Applied >= len(r.Steps) {
		return r, nil, fmt.Errorf("%w: ramp %d is %v", ErrNotActive, r.ID, r.State)
	}
	r = r.Clone()
	w := r.Steps[r.Applied].Weights
	r.Applied++
	r.UpdatedAt = now
	if r.Applied == len(r.Steps) {
		r.State, r.NextAt, r.Reason = Done, time.Time{}, "all steps applied"
	} else {
		r.NextAt = now.Add(r.Steps[r.Applied].After)
	}
	return r, maps.Clone(w), nil
}

// Pause returns r paused at now, keeping the wait left to its next step;
// reason says who or what paused it. It fails with ErrNotActive unless r is
// Running.
func (r Ramp) Pause(now time.Time, reason string) (Ramp, error) {
	if r.State != Running {
		return r, fmt.Errorf("%w: ramp %d is %v; only a running ramp can be paused", ErrNotActive, r.ID, r.State)
	}
	r = r.Clone()
	r.State, r.Remaining, r.NextAt = Paused, max(0, r.NextAt.Sub(now)), time.Time{}
	r.UpdatedAt, r.Reason = now, reason
	return r, nil
}

// Resume returns r running again at now, its next step due after the wait
// it had left when paused. It fails with ErrNotActive unless r is Paused.
func (r Ramp) Resume(now time.Time, reason string) (Ramp, error) {
	if r.State != Paused {
		return r, fmt.Errorf("%w: ramp %d is %v; only a paused ramp can be resumed", ErrNotActive, r.ID, r.State)
	}
	r = r.Clone()
	r.State, r.NextAt, r.Remaining = Running, now.Add(r.Remaining), 0
	r.UpdatedAt, r.Reason = now, reason
	return r, nil
}

// Abort returns r aborted at now. The weights stay those of the last
// applied step. It fails with ErrNotActive unless r is Running or Paused.
func (r Ramp) Abort(now time.Time, reason string) (Ramp, error) {
	if !r.State.Active() {
		return r, fmt.Errorf("%w: ramp %d is already %v", ErrNotActive, r.ID, r.State)
	}
	r = r.Clone()
	r.State, r.NextAt, r.Remaining = Aborted, time.Time{}, 0
	r.UpdatedAt, r.Reason = now, reason
	return r, nil
}
