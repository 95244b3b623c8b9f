package store

import (
	"fmt"
	"time"

	"github.com/prefixroute/prefixroute/internal/rollout"
)

// rampJSON is a pool's ramp in the state file and in the audit log. Waits
// are Go duration strings; times RFC 3339 in UTC; absent times are omitted.
type rampJSON struct {
	ID         uint64             `json:"id"`
	State      string             `json:"state"`
	Start      map[string]float64 `json:"start"`
	Steps      []rampStepJSON     `json:"steps"`
	Applied    int                `json:"applied"`
	NextAt     *time.Time         `json:"next_at,omitempty"`
	Remaining  string             `json:"remaining,omitempty"`
	AutoHold   *autoHoldJSON      `json:"auto_hold,omitempty"`
	AllowDrain bool               `json:"allow_drain,omitempty"`
	StartedAt  time.Time          `json:"started_at"`
	StartedBy  string             `json:"started_by"`
	UpdatedAt  time.Time          `json:"updated_at"`
	Reason     string             `json:"reason,omitempty"`
}

type rampStepJSON struct {
	Weights map[string]float64 `json:"weights"`
	After   string             `json:"after"`
}

type autoHoldJSON struct {
	MinHeadroomPct float64 `json:"min_headroom_pct"`
	From           string  `json:"from,omitempty"`
	To             string  `json:"to,omitempty"`
}

func encodeRamp(r *rollout.Ramp) *rampJSON {
	j := &rampJSON{
		ID: r.ID, State: r.State.String(), Start: r.Start, Applied: r.Applied,
		StartedAt: r.StartedAt.UTC(), StartedBy: r.StartedBy, UpdatedAt: r.UpdatedAt.UTC(), Reason: r.Reason,
		AllowDrain: r.AllowDrain,
	}
	if !r.NextAt.IsZero() {
		t := r.NextAt.UTC()
		j.NextAt = &t
	}
	if r.State == rollout.Paused {
		j.Remaining = r.Remaining.String()
	}
	if r.AutoHold.MinHeadroomPct > 0 {
		j.AutoHold = &autoHoldJSON{MinHeadroomPct: r.AutoHold.MinHeadroomPct, From: r.AutoHold.From, To: r.AutoHold.To}
	}
	j.Steps = make([]rampStepJSON, len(r.Steps))
	for i, s := range r.Steps {
		j.Steps[i] = rampStepJSON{Weights: s.Weights, After: s.After.String()}
	}
	return j
}

// decode checks and converts a ramp read from the state file: the same
// checks StartRamp makes, so a file Open accepts is one the store could
// have written.
func (j *rampJSON) decode() (rollout.Ramp, error) {
	st, err := rollout.ParseState(j.State)
	if err != nil {
		return rollout.Ramp{}, err
	}
	r := rollout.Ramp{
		ID: j.ID, State: st, Start: j.Start, Applied: j.Applied,
		StartedAt: j.StartedAt, StartedBy: j.StartedBy, UpdatedAt: j.UpdatedAt, Reason: j.Reason,
		AllowDrain: j.AllowDrain,
	}
	if j.NextAt != nil {
		r.NextAt = *j.NextAt
	}
	if j.Remaining != "" {
		if r.Remaining, err = time.ParseDuration(j.Remaining); err != nil || r.Remaining < 0 {
			return r, fmt.Errorf("remaining %q is not a duration >= 0", j.Remaining)
		}
	}
	if j.AutoHold != nil {
		r.AutoHold = rollout.AutoHold{MinHeadroomPct: j.AutoHold.MinHeadroomPct, From: j.AutoHold.From, To: j.AutoHold.To}
	}
	r.Steps = make([]rollout.Step, len(j.Steps))
	for i, s := range j.Steps {
		d, err := time.ParseDuration(s.After)
		if err != nil {
			return r, fmt.Errorf("steps[%d].after %q is not a duration", i, s.After)
		}
		r.Steps[i] = rollout.Step{Weights: s.Weights, After: d}
	}
	if err := checkRamp(&r); err != nil {
		return r, err
	}
	if r.Applied < 0 || r.Applied > len(r.Steps) {
		return r, fmt.Errorf("applied %d is outside 0..%d steps", r.Applied, len(r.Steps))
	}
	if r.State == rollout.Running && r.NextAt.IsZero() {
		return r, fmt.Errorf("a running ramp needs next_at")
	}
	return r, nil
}

// checkRamp checks a ramp's steps and weights: the limits of
// rollout.CheckSteps, and every weight map as SetWeights checks it.
func checkRamp(r *rollout.Ramp) error {
	if r.AutoHold.MinHeadroomPct < 0 || r.AutoHold.MinHeadroomPct > 100 {
		return fmt.Errorf("%w: auto-hold headroom %v%% is outside 0..100%%", rollout.ErrInvalidRamp, r.AutoHold.MinHeadroomPct)
	}
	if len(r.Start) > 0 {
		if err := ValidateWeights(r.Start); err != nil {
			return fmt.Errorf("start: %w", err)
		}
	}
	for i, s := range r.Steps {
		if err := ValidateWeights(s.Weights); err != nil {
			return fmt.Errorf("steps[%d]: %w", i, err)
		}
	}
	return rollout.CheckSteps(r.Steps)
}
