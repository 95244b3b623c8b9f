package cluster

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Sentinel errors returned by Link methods; test with errors.Is.
var (
	// ErrUnavailable means NATS (or JetStream) could not be reached in
	// time. It wraps the cause. For a write that timed out the outcome is
	// unknown: the change may still have been applied (Get tells). When
	// the caller's own ctx ends first, its ctx.Err() is returned instead.
	ErrUnavailable = errors.New("cluster: nats unavailable")
	// ErrNotFound means the key has no value (never set, or deleted).
	ErrNotFound = errors.New("cluster: key not found")
	// ErrExists means Create found the key already set.
	ErrExists = errors.New("cluster: key exists")
	// ErrRevisionMismatch means Update's lastRevision is not the key's
	// current revision. The returned error is a *RevisionMismatchError.
	ErrRevisionMismatch = errors.New("cluster: revision mismatch")
	// ErrInvalidKey means the key is not a valid KV key: non-empty,
	// letters, digits and "-/_=.", not starting or ending with '.'.
	// Use EncodeToken to embed arbitrary names.
	ErrInvalidKey = errors.New("cluster: invalid key")
	// ErrNoPeers means no other replica answered a snapshot request in
	// time (or every one that answered failed).
	ErrNoPeers = errors.New("cluster: no peer answered")
	// ErrClosed means the Link was closed.
	ErrClosed = errors.New("cluster: link closed")
	// ErrTooLarge means an event payload cannot fit in one NATS message.
	ErrTooLarge = errors.New("cluster: payload too large")
)

// RevisionMismatchError is returned by Update (and Delete with a
// revision) when lastRevision is stale. errors.Is(err,
// ErrRevisionMismatch) holds.
type RevisionMismatchError struct {
	Key string
	// Expected is the lastRevision the caller passed.
	Expected uint64
	// Current is the key's current revision (including a delete marker's)
	// when CurrentKnown; 0 with CurrentKnown means the key never existed.
	Current      uint64
	CurrentKnown bool
}

// Error implements error.
func (e *RevisionMismatchError) Error() string {
	if !e.CurrentKnown {
		return fmt.Sprintf("cluster: revision mismatch on %q: expected %d, current unknown", e.Key, e.Expected)
	}
	return fmt.Sprintf("cluster: revision mismatch on %q: expected %d, current %d", e.Key, e.Expected, e.Current)
}

// Is makes errors.Is(err, ErrRevisionMismatch) true.
func (e *RevisionMismatchError) Is(target error) bool { return target == ErrRevisionMismatch }

// mapErr turns a nats / jetstream error from a KV call into one of the
// sentinels above. parent is the caller's context: its own cancellation
// is returned as is, so a caller's deadline is not reported as an outage.
func mapErr(parent context.Context, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, jetstream.ErrKeyNotFound), errors.Is(err, jetstream.ErrKeyDeleted):
		return fmt.Errorf("%w: %w", ErrNotFound, err)
	case errors.Is(err, jetstream.ErrKeyExists):
		return fmt.Errorf("%w: %w", ErrExists, err)
	case errors.Is(err, jetstream.ErrInvalidKey):
		return fmt.Errorf("%w: %w", ErrInvalidKey, err)
	case errors.Is(err, nats.ErrConnectionClosed) && parent.Err() == nil:
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	if perr := parent.Err(); perr != nil {
		return perr
	}
	// Everything else on the KV path is a transport or JetStream outage:
	// timeouts, no responders, reconnect buffer refusals, JetStream not
	// ready after a restart, insufficient resources on a cluster.
	return fmt.Errorf("%w: %w", ErrUnavailable, err)
}
