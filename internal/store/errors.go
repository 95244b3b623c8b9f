package store

import (
	"errors"
	"fmt"

	"github.com/prefixroute/prefixroute/internal/rollout"
	"github.com/prefixroute/prefixroute/scheduler"
)

// The sentinel errors of the store. Every error a method returns wraps one of
// them (test with errors.Is); the message adds what was wrong and what is
// allowed.
var (
	// ErrCorruptState is returned by Open when the state file cannot be read
	// or parsed. The file is left untouched; the daemon must not start.
	ErrCorruptState = errors.New("corrupt state file")
	// ErrLocked is returned by Open when another process holds the data dir.
	ErrLocked = errors.New("data dir locked")
	// ErrInvalidWeights is returned by SetWeights for a weight out of range,
	// too many deployments, no deployment, or a bad deployment name.
	ErrInvalidWeights = errors.New("invalid weights")
	// ErrInvalidName is returned for a bad pool or deployment name.
	ErrInvalidName = errors.New("invalid name")
	// ErrInvalidPolicy is returned by SetPolicy for a policy that fails
	// scheduler.Policy.Validate. It is scheduler.ErrInvalidPolicy.
	ErrInvalidPolicy = scheduler.ErrInvalidPolicy
	// ErrVersionMismatch is returned by SetWeights when expectedVersion is
	// neither 0 nor the current version. The error is a *VersionMismatchError.
	ErrVersionMismatch = errors.New("version mismatch")
	// ErrPersist is returned when writing the state file or the audit log
	// fails. The change was not made: memory and the state file keep the old
	// configuration.
	ErrPersist = errors.New("cannot persist configuration")
	// ErrRampActive is returned by SetWeights and StartRamp while the pool
	// has a running or paused ramp.
	ErrRampActive = errors.New("ramp active")
	// ErrNoRamp is returned by the ramp changes of a pool that never had a
	// ramp.
	ErrNoRamp = errors.New("no ramp")
	// ErrInvalidRamp is rollout.ErrInvalidRamp: steps out of the limits.
	ErrInvalidRamp = rollout.ErrInvalidRamp
	// ErrRampNotActive is rollout.ErrNotActive: a ramp change the ramp's
	// state does not allow (pause of a paused ramp, abort of a done one), or
	// a step applied by someone else first.
	ErrRampNotActive = rollout.ErrNotActive
	// ErrClosed is returned by a change after Close.
	ErrClosed = errors.New("store closed")
)

// VersionMismatchError is the error of a failed compare-and-set. It matches
// ErrVersionMismatch with errors.Is.
type VersionMismatchError struct {
	Pool     string
	Expected uint64 // the caller's expected_version
	Current  uint64 // the pool's weights version
}

// Error implements error.
func (e *VersionMismatchError) Error() string {
	return fmt.Sprintf("%v: pool %q: expected_version %d, current %d; read the weights again and retry",
		ErrVersionMismatch, e.Pool, e.Expected, e.Current)
}

// Is reports whether target is ErrVersionMismatch.
func (e *VersionMismatchError) Is(target error) bool { return target == ErrVersionMismatch }

// invalidError is a validation error that matches one or more sentinels.
type invalidError struct {
	msg   string
	kinds []error // kinds[0] prefixes the message
}

func (e *invalidError) Error() string   { return e.kinds[0].Error() + ": " + e.msg }
func (e *invalidError) Unwrap() []error { return e.kinds }

func invalid(msg string, kinds ...error) error { return &invalidError{msg: msg, kinds: kinds} }
