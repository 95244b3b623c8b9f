package server

import (
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/prefixroute/prefixroute/internal/protoconv"
	"github.com/prefixroute/prefixroute/internal/readiness"
	"github.com/prefixroute/prefixroute/internal/replica"
	"github.com/prefixroute/prefixroute/internal/rollout"
	"github.com/prefixroute/prefixroute/internal/state"
	"github.com/prefixroute/prefixroute/internal/store"
	"github.com/prefixroute/prefixroute/scheduler"
)

// codeOf maps the core's sentinel errors to gRPC codes. This is the only
// place where they meet.
func codeOf(err error) codes.Code {
	switch {
	case errors.Is(err, state.ErrPoolNotFound), errors.Is(err, store.ErrNoRamp), errors.Is(err, readiness.ErrUnknownDeployment):
		return codes.NotFound
	case errors.Is(err, store.ErrRampActive), errors.Is(err, store.ErrRampNotActive), errors.Is(err, rollout.ErrDrain):
		return codes.FailedPrecondition
	case errors.Is(err, state.ErrInvalidPick), errors.Is(err, state.ErrInvalidReport), errors.Is(err, state.ErrInvalidName),
		errors.Is(err, state.ErrInvalidOutcome),
		errors.Is(err, store.ErrInvalidWeights), errors.Is(err, store.ErrInvalidName),
		errors.Is(err, scheduler.ErrInvalidPolicy), errors.Is(err, store.ErrInvalidRamp),
		errors.Is(err, readiness.ErrSameDeployment), errors.Is(err, readiness.ErrInvalidQuery):
		return codes.InvalidArgument
	case errors.Is(err, state.ErrTooManyPools), errors.Is(err, state.ErrTooManyInstances),
		errors.Is(err, scheduler.ErrSaturated), errors.Is(err, scheduler.ErrSLOUnattainable),
		errors.Is(err, scheduler.ErrPrefillSaturated):
		return codes.ResourceExhausted
	case errors.Is(err, state.ErrSessionEnded):
		return codes.Aborted
	case errors.Is(err, state.ErrTakeoverRefused):
		return codes.PermissionDenied
	case errors.Is(err, store.ErrVersionMismatch):
		return codes.Aborted
	case errors.Is(err, state.ErrPoolWarming):
		return codes.Unavailable
	case errors.Is(err, store.ErrPersist), errors.Is(err, replica.ErrClusterUnavailable):
		return codes.Unavailable
	case errors.Is(err, scheduler.ErrNoInstances), errors.Is(err, scheduler.ErrNoEligibleInstance),
		errors.Is(err, scheduler.ErrNoPrefillInstance):
		return codes.Unavailable
	case errors.Is(err, scheduler.ErrAllWeightsZero):
		return codes.FailedPrecondition
	}
	return codes.Internal
}

// reasonOf maps the core's sentinel errors a client may act on to the
// reason of the status's ErrorInfo (protoconv.ErrorDomain), "" for none.
func reasonOf(err error) string {
	if errors.Is(err, state.ErrPoolWarming) {
		return protoconv.ReasonPoolWarming
	}
	return ""
}

// statusOf wraps err in a status with its mapped code (and reason).
func statusOf(err error) error {
	if _, ok := status.FromError(err); ok {
		return err
	}
	return newStatus(err, err.Error())
}

// newStatus is the status of err, with its mapped code and reason, and
// the message msg.
func newStatus(err error, msg string) error {
	if r := reasonOf(err); r != "" {
		return protoconv.WithReason(codeOf(err), msg, r, "").Err()
	}
	return status.Error(codeOf(err), msg)
}

// invalid is an InvalidArgument status.
func invalid(format string, args ...any) error {
	return status.Error(codes.InvalidArgument, fmt.Sprintf(format, args...))
}
