package state

import "fmt"

// TakeoverError is ConnectIf's refusal to take over an instance: the
// instance lives in From (with its session open when Live) and the new
// stream reports it in deployment To. It wraps ErrTakeoverRefused.
type TakeoverError struct {
	Pool, Instance, From, To string
	Live                     bool
}

func (e *TakeoverError) Error() string {
	return fmt.Sprintf("%v: instance %q of pool %q lives in deployment %q (stream open: %t); this stream reports it in deployment %q",
		ErrTakeoverRefused, e.Instance, e.Pool, e.From, e.Live, e.To)
}

// Unwrap returns ErrTakeoverRefused.
func (e *TakeoverError) Unwrap() error { return ErrTakeoverRefused }

// Covers decides whether a new report stream may take over an instance
// (replace its open session, or move it to another deployment), given the
// instance's identity where it lives now. ConnectIf calls it with the
// pool's lock held: it must not call back into the pool.
type Covers func(current Identity) bool

// Takeover is what Connect did to an instance that existed already:
// replaced a session still open (Live, from PrevAddress) and/or moved the
// instance from deployment MovedFrom ("" when it stayed).
type Takeover struct {
	Live        bool
	PrevAddress string
	MovedFrom   string
}

// isTakeover reports what connecting id to in (nil: a new instance)
// takes over; ok is false when it takes nothing over.
func isTakeover(in *instance, id Identity) (t Takeover, ok bool) {
	if in == nil {
		return Takeover{}, false
	}
	t = Takeover{Live: in.session != nil, PrevAddress: in.id.Address}
	if in.id.Deployment != id.Deployment {
		t.MovedFrom = in.id.Deployment
	}
	if !t.Live && t.MovedFrom == "" {
		return Takeover{}, false
	}
	return t, true
}

// Takeover returns what the session's Connect took over; ok is false when
// it took nothing over (a new instance, or a reconnect after the old
// stream ended).
func (s *Session) Takeover() (t Takeover, ok bool) {
	return s.took, s.took.Live || s.took.MovedFrom != ""
}
