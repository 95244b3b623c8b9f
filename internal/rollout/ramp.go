package rollout

import (
	"errors"
	"fmt"
	"maps"
	"time"
)

// Limits of a ramp, checked by Validate.
const (
	// MaxSteps is the most steps a ramp may have.
	MaxSteps = 1000
	// MinInterval is the shortest wait between two steps of a linear ramp
	// (Plan); explicit steps may use 0 to apply at once.
	MinInterval = time.Second
	// MaxWait is the longest wait before one step.
	MaxWait = 7 * 24 * time.Hour
	// MaxDuration is the longest total of a ramp's waits.
	MaxDuration = 30 * 24 * time.Hour
)

// Sentinel errors. Every error of this package wraps one of them.
var (
	// ErrInvalidRamp: a plan or step list out of the limits.
	ErrInvalidRamp = errors.New("invalid ramp")
	// ErrNotActive: pause, resume, abort or step of a ramp that is not in a
	// state allowing it (done, aborted, or paused for a step).
	ErrNotActive = errors.New("ramp not active")
)

// State is where a ramp is in its life.
type State int

// The states of a ramp. Running and Paused are active: the ramp owns the
// pool's weights, and a manual weight change is refused until it ends.
const (
	Running State = iota + 1
	Paused
	Done
	Aborted
)

var stateNames = map[State]string{Running: "running", Paused: "paused", Done: "done", Aborted: "aborted"}

// String returns the state's name: running, paused, done or aborted.
func (s State) String() string {
	if n, ok := stateNames[s]; ok {
		return n
	}
	return fmt.Sprintf("State(%d)", int(s))
}

// ParseState returns the State named s, as String spells it.
func ParseState(s string) (State, error) {
	for st, n := range stateNames {
		if n == s {
			return st, nil
		}
	}
	return 0, fmt.Errorf("unknown ramp state %q; want running, paused, done or aborted", s)
}

// Active reports whether a ramp in state s owns the pool's weights.
func (s State) Active() bool { return s == Running || s == Paused }

// Step is one step of a ramp: the weights it applies, After the previous
// step was applied (or the ramp started).
type Step struct {
	Weights map[string]float64
	After   time.Duration
}

// AutoHold pauses a running ramp before a step when the deployment gaining
// traffic would be left with less prefill headroom than MinHeadroomPct.
// The zero value is off.
type AutoHold struct {
	// MinHeadroomPct is the headroom, in percent of To's prefill capacity,
	// that must be left after the next step; 0 turns auto-hold off.
	MinHeadroomPct float64
	// From and To name the deployments losing and gaining traffic. Empty
	// means the ones whose share falls and rises most over the ramp.
	From, To string
}

// Ramp is one ramp of one pool. It is a value: functions of this package
// return a changed copy and never modify the Ramp they are given, nor its
// maps.
type Ramp struct {
	// ID numbers the pool's ramps from 1.
	ID    uint64
	State State
	// Start is the weights in force when the ramp started.
	Start map[string]float64
	Steps []Step
	// Applied counts the steps applied; Steps[Applied] is the next one.
	Applied int
	// NextAt is when the next step is due, while Running.
	NextAt time.Time
	// Remaining is the wait left to the next step, while Paused.
	Remaining time.Duration
	AutoHold  AutoHold
	// AllowDrain: started with allow_drain, so no step is held by the
	// drain guard (CheckWeights).
	AllowDrain bool
	StartedAt  time.Time
	StartedBy  string
	// UpdatedAt and Reason record the last transition: who paused, resumed
	// or aborted it, or why auto-hold paused it.
	UpdatedAt time.Time
	Reason    string
}

// Clone returns a copy of r sharing no memory with it.
func (r Ramp) Clone() Ramp {
	r.Start = maps.Clone(r.Start)
	steps := make([]Step, len(r.Steps))
	for i, s := range r.Steps {
		steps[i] = Step{Weights: maps.Clone(s.Weights), After: s.After}
	}
	r.Steps = steps
	return r
}

// Target returns the weights of the last step.
func (r *Ramp) Target() map[string]float64 {
	if len(r.Steps) == 0 {
		return nil
	}
	return r.Steps[len(r.Steps)-1].Weights
}

// Current returns the weights the ramp applied last: Start before its
// first step.
func (r *Ramp) Current() map[string]float64 {
	if r.Applied == 0 {
		return r.Start
	}
	return r.Steps[r.Applied-1].Weights
}

// Next returns the next step, and false when every step is applied.
func (r *Ramp) Next() (Step, bool) {
	if r.Applied >= len(r.Steps) {
		return Step{}, false
	}
	return r.Steps[r.Applied], true
}

// Remains returns the total wait left before the last step at now: the wait
// to the next step plus the waits of the steps after it.
func (r *Ramp) Remains(now time.Time) time.Duration {
	var d time.Duration
	switch r.State {
	case Running:
		d = max(0, r.NextAt.Sub(now))
	case Paused:
		d = r.Remaining
	default:
		return 0
	}
	for i := r.Applied + 1; i < len(r.Steps); i++ {
		d += r.Steps[i].After
	}
	return d
}
