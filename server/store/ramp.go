package store

import (
	"fmt"
	"time"

	"github.com/prefixroute/prefixroute/server/rollout"
)

// StartRamp starts a ramp of pool's weights from start (the weights in
// force, as the caller computed them) through steps, and returns the new
// configuration. It fails with ErrRampActive while another ramp is active,
// with a *VersionMismatchError unless expectedVersion is 0 or the weights
// version the caller computed start from, and with ErrInvalidRamp or
// ErrInvalidWeights for bad steps. The ramp's first step is due
// steps[0].After from now. Durable and audited (kind "ramp", event
// "start") before it returns.
func (s *Store) StartRamp(pool string, start map[string]float64, steps []rollout.Step, hold rollout.AutoHold,
	expectedVersion uint64, caller string) (PoolConfig, error) {
	if err := ValidatePoolName(pool); err != nil {
		return PoolConfig{}, err
	}
	probe := rollout.Ramp{Start: start, Steps: steps, AutoHold: hold}
	if err := checkRamp(&probe); err != nil {
		return PoolConfig{}, fmt.Errorf("pool %q: %w", pool, err)
	}
	return s.change(pool, kindRamp, caller, func(c *PoolConfig, now time.Time) error {
		if err := checkVersion(pool, c, expectedVersion); err != nil {
			return err
		}
		var id uint64 = 1
		if r := c.Ramp; r != nil {
			if r.State.Active() {
				return fmt.Errorf("%w: pool %q: ramp %d is %v at step %d of %d; abort it before starting another",
					ErrRampActive, pool, r.ID, r.State, r.Applied, len(r.Steps))
			}
			id = r.ID + 1
		}
		r := rollout.New(id, start, steps, hold, now, caller)
		c.Ramp = &r
		return nil
	})
}

// StepRamp applies the next step of pool's ramp id, whose Applied count the
// caller saw as applied: the step's weights replace the pool's, the weights
// version grows by 1, and the ramp moves on (or is done). A step already
// applied, or a ramp no longer running, fails with ErrRampNotActive, so a
// step is never applied twice. Durable and audited (kind "weights", with the
// ramp's id and step) before it returns.
func (s *Store) StepRamp(pool string, id uint64, applied int, caller string) (PoolConfig, error) {
	return s.change(pool, kindWeights, caller, func(c *PoolConfig, now time.Time) error {
		r := c.Ramp
		if r == nil {
			return fmt.Errorf("%w: pool %q", ErrNoRamp, pool)
		}
		if r.ID != id || r.Applied != applied {
			return fmt.Errorf("%w: pool %q: ramp %d is at step %d; ramp %d step %d was already applied or replaced",
				ErrRampNotActive, pool, r.ID, r.Applied, id, applied+1)
		}
		next, w, err := r.Step(now)
		if err != nil {
			return fmt.Errorf("pool %q: %w", pool, err)
		}
		c.Ramp = &next
		c.Weights = w
		c.WeightsVersion++
		return nil
	})
}

// Ramp transitions, for UpdateRamp.
const (
	RampPause  = "pause"
	RampResume = "resume"
	RampAbort  = "abort"
)

// UpdateRamp pauses, resumes or aborts pool's ramp (op is RampPause,
// RampResume or RampAbort); reason says who or why, for GetRamp and the
// audit log. id 0 means the pool's current ramp; another id must be it. It
// fails with ErrNoRamp when the pool never had a ramp and ErrRampNotActive
// when the ramp's state does not allow op. Aborting leaves the weights of
// the last applied step. Durable and audited (kind "ramp") before it
// returns.
func (s *Store) UpdateRamp(pool string, id uint64, op, reason, caller string) (PoolConfig, error) {
	if err := ValidatePoolName(pool); err != nil {
		return PoolConfig{}, err
	}
	return s.change(pool, kindRamp, caller, func(c *PoolConfig, now time.Time) error {
		r := c.Ramp
		if r == nil {
			return fmt.Errorf("%w: pool %q never had a ramp", ErrNoRamp, pool)
		}
		if id != 0 && id != r.ID {
			return fmt.Errorf("%w: pool %q: ramp %d is not the current ramp (%d)", ErrRampNotActive, pool, id, r.ID)
		}
		var next rollout.Ramp
		var err error
		switch op {
		case RampPause:
			next, err = r.Pause(now, reason)
		case RampResume:
			next, err = r.Resume(now, reason)
		case RampAbort:
			next, err = r.Abort(now, reason)
		default:
			return fmt.Errorf("unknown ramp operation %q", op)
		}
		if err != nil {
			return fmt.Errorf("pool %q: %w", pool, err)
		}
		c.Ramp = &next
		return nil
	})
}

// rampEvent names a ramp change for the audit log, from the states before
// and after it.
func rampEvent(old, next *rollout.Ramp) string {
	switch {
	case next == nil:
		return ""
	case old == nil || old.ID != next.ID:
		return "start"
	case next.State == rollout.Paused:
		return "pause"
	case next.State == rollout.Aborted:
		return "abort"
	case next.State == rollout.Done:
		return "done"
	case old.State == rollout.Paused:
		return "resume"
	}
	return "step"
}
