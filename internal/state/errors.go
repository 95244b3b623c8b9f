package state

import "errors"

// Errors of the state layer. The server maps them to gRPC codes; messages
// wrapping them say which field or limit was involved.
var (
	// ErrPoolNotFound: no instance has reported into the pool and no operator
	// configured it.
	ErrPoolNotFound = errors.New("pool not found")
	// ErrPoolWarming: the pool is known (configured, or instances reported
	// into it within the seen set's TTL, possibly before a restart) but has
	// no instance now: its instances have not reported (again) yet. A pick
	// may be retried shortly; it is never "not found".
	ErrPoolWarming = errors.New("pool warming up")
	// ErrTooManyPools: creating the pool would pass Limits.MaxPools.
	ErrTooManyPools = errors.New("too many pools")
	// ErrTooManyInstances: a new instance would pass Limits.MaxInstancesPerPool.
	ErrTooManyInstances = errors.New("too many instances in pool")
	// ErrInvalidReport: a load report is malformed or over a limit.
	ErrInvalidReport = errors.New("invalid load report")
	// ErrInvalidName: a pool name is empty, too long or not printable UTF-8.
	ErrInvalidName = errors.New("invalid name")
	// ErrInvalidPick: a pick request is malformed or over a limit.
	ErrInvalidPick = errors.New("invalid pick request")
	// ErrSessionEnded: the session was replaced by a newer stream for the same
	// instance, or the instance was forgotten.
	ErrSessionEnded = errors.New("report session ended")
	// ErrTakeoverRefused: a report stream's caller may not take over the
	// instance where it lives now (ConnectIf; a *TakeoverError says where).
	ErrTakeoverRefused = errors.New("instance takeover refused")
	// ErrInvalidOutcome: a gateway's outcome report is malformed or over a
	// limit.
	ErrInvalidOutcome = errors.New("invalid outcome")
)
