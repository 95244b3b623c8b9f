package store

import (
	"fmt"
	"maps"
	"time"

	"github.com/prefixroute/prefixroute/internal/rollout"
	"github.com/prefixroute/prefixroute/scheduler"
)

// Edit is one checked change of a pool's configuration: made by a
// constructor below, which validates its arguments, and applied by
// Store.Change (locally) or Edit.Apply (to a configuration held elsewhere,
// such as a cluster's key-value bucket). An Edit is immutable and safe to
// apply again, e.g. after losing a compare-and-set race.
type Edit struct {
	kind  string // the audit record's kind
	apply func(c *PoolConfig, now time.Time) error
	// fromCopy: the caller computed arguments from its own copy of the
	// configuration (StartRamp's start weights).
	fromCopy bool
}

// FromCopy reports whether the edit's arguments were computed from the
// caller's copy of the configuration, so that applying it to a newer one
// (another replica's change) would be wrong: such an edit must be prepared
// again. Edits whose arguments stand on their own (a weights map with its
// expected version, a policy merge, a ramp step) can be re-applied.
func (e Edit) FromCopy() bool { return e.fromCopy }

// Apply returns c changed by e at now, or the edit's error (a version
// mismatch, a ramp in the way). c is not modified.
func (e Edit) Apply(c PoolConfig, now time.Time) (PoolConfig, error) {
	next := c.clone()
	if err := e.apply(&next, now); err != nil {
		return c, err
	}
	next.UpdatedAt = now.UTC()
	return next, nil
}

// SetWeights replaces the weights of pool; see WeightsEdit.
func (s *Store) SetWeights(pool string, weights map[string]float64, expectedVersion uint64, caller string) (PoolConfig, error) {
	e, err := WeightsEdit(pool, weights, expectedVersion)
	if err != nil {
		return PoolConfig{}, err
	}
	return s.Change(pool, e, caller)
}

// WeightsEdit replaces the weights of pool. With expectedVersion other than
// 0, it fails with a *VersionMismatchError (ErrVersionMismatch) unless the
// pool's weights version is expectedVersion; 0 sets unconditionally. It
// fails with ErrRampActive while a ramp owns the weights. The weights must
// pass ValidateWeights; all 0 is a full drain, marked as such in the audit
// log.
func WeightsEdit(pool string, weights map[string]float64, expectedVersion uint64) (Edit, error) {
	if err := ValidatePoolName(pool); err != nil {
		return Edit{}, err
	}
	if err := ValidateWeights(weights); err != nil {
		return Edit{}, fmt.Errorf("pool %q: %w", pool, err)
	}
	weights = maps.Clone(weights)
	return Edit{kind: kindWeights, apply: func(c *PoolConfig, _ time.Time) error {
		if err := checkVersion(pool, c, expectedVersion); err != nil {
			return err
		}
		if r := c.Ramp; r != nil && r.State.Active() {
			return fmt.Errorf("%w: pool %q: ramp %d is %v at step %d of %d and owns the weights; abort it first",
				ErrRampActive, pool, r.ID, r.State, r.Applied, len(r.Steps))
		}
		c.Weights = maps.Clone(weights)
		c.WeightsVersion++
		return nil
	}}, nil
}

// checkVersion is the compare-and-set check of a weights change: nil when
// expectedVersion is 0 or the pool's weights version.
func checkVersion(pool string, c *PoolConfig, expectedVersion uint64) error {
	if expectedVersion != 0 && expectedVersion != c.WeightsVersion {
		return &VersionMismatchError{Pool: pool, Expected: expectedVersion, Current: c.WeightsVersion}
	}
	return nil
}

// SetPolicy replaces the policy of pool; see PolicyEdit.
func (s *Store) SetPolicy(pool string, p scheduler.Policy, caller string) (PoolConfig, error) {
	e, err := PolicyEdit(pool, p)
	if err != nil {
		return PoolConfig{}, err
	}
	return s.Change(pool, e, caller)
}

// PolicyEdit replaces the policy of pool. The policy must pass
// p.Validate() (the caller normally checked already; the store checks again
// so that it never writes a state file Open would refuse).
func PolicyEdit(pool string, p scheduler.Policy) (Edit, error) {
	if err := ValidatePoolName(pool); err != nil {
		return Edit{}, err
	}
	if err := p.Validate(); err != nil {
		return Edit{}, fmt.Errorf("pool %q: %w", pool, err)
	}
	if _, err := encodePolicy(p); err != nil {
		return Edit{}, fmt.Errorf("pool %q: %w", pool, err)
	}
	return Edit{kind: kindPolicy, apply: func(c *PoolConfig, _ time.Time) error {
		pc := p
		c.Policy = &pc
		c.PolicyVersion++
		return nil
	}}, nil
}

// PolicyMergeEdit changes pool's policy to merge(the policy in force: the
// stored one, else scheduler.DefaultPolicy). The merge runs inside the
// edit, on the configuration the change applies to, so a change retried
// after losing a compare-and-set merges into the winner's policy rather
// than overwriting it. The result must pass what PolicyEdit checks.
func PolicyMergeEdit(pool string, merge func(base scheduler.Policy) (scheduler.Policy, error)) (Edit, error) {
	if err := ValidatePoolName(pool); err != nil {
		return Edit{}, err
	}
	return Edit{kind: kindPolicy, apply: func(c *PoolConfig, now time.Time) error {
		base := scheduler.DefaultPolicy()
		if c.Policy != nil {
			base = *c.Policy
		}
		p, err := merge(base)
		if err != nil {
			return fmt.Errorf("pool %q: %w", pool, err)
		}
		e, err := PolicyEdit(pool, p)
		if err != nil {
			return err
		}
		return e.apply(c, now)
	}}, nil
}

// StartRamp starts a ramp of pool's weights; see StartRampEdit.
func (s *Store) StartRamp(pool string, start map[string]float64, steps []rollout.Step, hold rollout.AutoHold,
	expectedVersion uint64, caller string) (PoolConfig, error) {
	e, err := StartRampEdit(pool, start, steps, hold, false, expectedVersion, caller)
	if err != nil {
		return PoolConfig{}, err
	}
	return s.Change(pool, e, caller)
}

// StartRampEdit starts a ramp of pool's weights from start (the weights in
// force, as the caller computed them) through steps, started by caller. It
// fails with ErrRampActive while another ramp is active, with a
// *VersionMismatchError unless expectedVersion is 0 or the pool's weights
// version (pass the version start was computed from), and with
// ErrInvalidRamp or ErrInvalidWeights for bad steps. The ramp's first step
// is due steps[0].After from the change. allowDrain is kept on the ramp
// (rollout.Ramp.AllowDrain): the caller's drain guard let it through. Audited
// as kind "ramp", event "start".
func StartRampEdit(pool string, start map[string]float64, steps []rollout.Step, hold rollout.AutoHold, allowDrain bool,
	expectedVersion uint64, caller string) (Edit, error) {
	if err := ValidatePoolName(pool); err != nil {
		return Edit{}, err
	}
	probe := rollout.Ramp{Start: start, Steps: steps, AutoHold: hold}
	if err := checkRamp(&probe); err != nil {
		return Edit{}, fmt.Errorf("pool %q: %w", pool, err)
	}
	probe = probe.Clone()
	return Edit{kind: kindRamp, fromCopy: true, apply: func(c *PoolConfig, now time.Time) error {
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
		r := rollout.New(id, probe.Start, probe.Steps, probe.AutoHold, now, caller)
		r.AllowDrain = allowDrain
		c.Ramp = &r
		return nil
	}}, nil
}

// StepRamp applies the next step of pool's ramp; see StepRampEdit.
func (s *Store) StepRamp(pool string, id uint64, applied int, caller string) (PoolConfig, error) {
	return s.Change(pool, StepRampEdit(pool, id, applied), caller)
}

// StepRampEdit applies the next step of pool's ramp id, whose Applied count
// the caller saw as applied: the step's weights replace the pool's, the
// weights version grows by 1, and the ramp moves on (or is done). A step
// already applied, or a ramp no longer running, fails with ErrRampNotActive,
// so a step is never applied twice. Audited as kind "weights" with the
// ramp's id and step.
func StepRampEdit(pool string, id uint64, applied int) Edit {
	return Edit{kind: kindWeights, apply: func(c *PoolConfig, now time.Time) error {
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
	}}
}

// DueRamps returns a copy of every running ramp with a step due at now, by
// pool. It copies nothing else, so a ticker may call it often.
func (s *Store) DueRamps(now time.Time) map[string]rollout.Ramp {
	var out map[string]rollout.Ramp
	for name, c := range *s.pools.Load() {
		if c.Ramp != nil && c.Ramp.Due(now) {
			if out == nil {
				out = make(map[string]rollout.Ramp)
			}
			out[name] = c.Ramp.Clone()
		}
	}
	return out
}

// Ramp transitions, for UpdateRampEdit.
const (
	RampPause  = "pause"
	RampResume = "resume"
	RampAbort  = "abort"
)

// UpdateRamp pauses, resumes or aborts pool's ramp; see UpdateRampEdit.
func (s *Store) UpdateRamp(pool string, id uint64, op, reason, caller string) (PoolConfig, error) {
	e, err := UpdateRampEdit(pool, id, op, reason)
	if err != nil {
		return PoolConfig{}, err
	}
	return s.Change(pool, e, caller)
}

// UpdateRampEdit pauses, resumes or aborts pool's ramp (op is RampPause,
// RampResume or RampAbort); reason says who or why, for GetRamp and the
// audit log. id 0 means the pool's current ramp; another id must be it. It
// fails with ErrNoRamp when the pool never had a ramp and ErrRampNotActive
// when the ramp's state does not allow op. Aborting leaves the weights of
// the last applied step. Audited as kind "ramp".
func UpdateRampEdit(pool string, id uint64, op, reason string) (Edit, error) {
	if err := ValidatePoolName(pool); err != nil {
		return Edit{}, err
	}
	if op != RampPause && op != RampResume && op != RampAbort {
		return Edit{}, fmt.Errorf("unknown ramp operation %q", op)
	}
	return Edit{kind: kindRamp, apply: func(c *PoolConfig, now time.Time) error {
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
		default:
			next, err = r.Abort(now, reason)
		}
		if err != nil {
			return fmt.Errorf("pool %q: %w", pool, err)
		}
		c.Ramp = &next
		return nil
	}}, nil
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
