package report

import (
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/prefixroute/prefixroute/internal/state"
)

// TakeoverOutcome is an outcome of prefixroute_instance_takeovers.
type TakeoverOutcome uint8

// The outcomes, in the order of TakeoverNames.
const (
	TakeoverReplaced    TakeoverOutcome = iota // a session still open, same deployment
	TakeoverMoved                              // the instance came back in another deployment
	TakeoverRefused                            // the binding does not cover where it lives
	NumTakeoverOutcomes = iota
)

// TakeoverNames are the outcome label values.
var TakeoverNames = [NumTakeoverOutcomes]string{"replaced", "moved", "refused"}

// covers is the check a stream's Connect makes before taking over an
// instance: its principal's binding must cover the instance where it lives
// now. Nil (any takeover) for an unbound or unauthenticated stream.
func (e *reportEngine) covers() state.Covers {
	p := e.bound
	if p == nil || p.Bind == nil {
		return nil
	}
	return func(cur state.Identity) bool { return p.Covers(cur.Pool, cur.Deployment, cur.Instance) }
}

// refused turns Connect's error for id into the member's status; a refused
// takeover is logged at WARN, counted, and answered PermissionDenied naming
// the instance, its deployment and the binding.
func (e *reportEngine) refused(id state.Identity, err error) error {
	var te *state.TakeoverError
	if !errors.As(err, &te) {
		return e.s.h.Status(err)
	}
	s := e.s
	s.guard.hit(e.ctx, "binding")
	s.h.Metrics.Takeover(id.Pool, TakeoverRefused)
	if ok, n := s.takeovers.note(id.Pool, id.Instance, s.now()); ok {
		s.h.Log.Warn("report stream refused: its identity's binding does not cover the instance where it lives",
			"identity", e.bound.Name, "binding", e.bound.Bind.String(), "pool", id.Pool, "instance", id.Instance,
			"from_deployment", te.From, "to_deployment", te.To, "address", id.Address,
			"takeovers_since_last_line", n, "window", FlapWindow.String())
	}
	return status.Errorf(codes.PermissionDenied,
		"identity %q is bound to %s, which does not cover instance %q of pool %q where it lives now (deployment %q); "+
			"this stream reports it in deployment %q: instance ids are unique per pool, so report an id of your own deployment",
		e.bound.Name, e.bound.Bind, te.Instance, te.Pool, te.From, te.To)
}

// tookOver counts, and logs at WARN, what the new session sess of id took
// over, if anything: a move from another deployment (once per instance per
// FlapWindow, as flaps are), or an open session's replacement (flaps.go).
func (e *reportEngine) tookOver(id state.Identity, sess *state.Session) {
	t, ok := sess.Takeover()
	if !ok {
		return
	}
	s := e.s
	if t.MovedFrom == "" {
		s.h.Metrics.Takeover(id.Pool, TakeoverReplaced)
		s.tookOver(e.ctx, id, t.PrevAddress)
		return
	}
	s.h.Metrics.Takeover(id.Pool, TakeoverMoved)
	if ok, n := s.takeovers.note(id.Pool, id.Instance, s.now()); ok {
		s.h.Log.Warn("report stream moved an instance id to another deployment: a redeploy, or a misconfigured id",
			"identity", e.who, "pool", id.Pool, "instance", id.Instance,
			"from_deployment", t.MovedFrom, "to_deployment", id.Deployment, "address", id.Address,
			"previous_address", t.PrevAddress, "stream_was_open", t.Live,
			"takeovers_since_last_line", n, "window", FlapWindow.String())
	}
}
