package report

import (
	"context"
	"sync"
	"time"

	"github.com/prefixroute/prefixroute/internal/state"
)

// FlapWindow is how often, at most, the takeover of one instance id by
// another report stream is logged: the first takeover logs at once, later
// ones within the window only count (prefixroute_instance_identity_flaps_total)
// and are summed into the next line.
const FlapWindow = time.Minute

// flapLog decides which identity takeovers are logged, at most one line per
// instance per FlapWindow. Safe for concurrent use.
type flapLog struct {
	mu   sync.Mutex
	last map[flapKey]flapState
}

type flapKey struct{ pool, instance string }

type flapState struct {
	logged time.Time
	since  int // takeovers not logged since logged
}

// note records a takeover at now and returns whether to log it, with the
// takeovers of the instance since the last line, this one included.
func (f *flapLog) note(pool, instance string, now time.Time) (bool, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.last == nil {
		f.last = make(map[flapKey]flapState)
	}
	k := flapKey{pool, instance}
	st, seen := f.last[k]
	st.since++
	if seen && now.Sub(st.logged) < FlapWindow {
		f.last[k] = st
		return false, st.since
	}
	n := st.since
	f.last[k] = flapState{logged: now}
	for key, s := range f.last { // forget quiet instances: the map stays small
		if now.Sub(s.logged) >= FlapWindow && s.since == 0 && key != k {
			delete(f.last, key)
		}
	}
	return true, n
}

// tookOver counts and, once per FlapWindow, logs a new report stream that
// replaced one still open for the same instance id.
func (s *Engine) tookOver(ctx context.Context, id state.Identity, prevAddress string) {
	s.h.Metrics.IdentityFlap(id.Pool, id.Deployment)
	if ok, n := s.flaps.note(id.Pool, id.Instance, s.now()); ok {
		s.h.Log.Warn("report stream took over an instance id whose stream was still open: a reconnect, or two instances sharing one id",
			"pool", id.Pool, "deployment", id.Deployment, "instance", id.Instance, "address", id.Address,
			"previous_address", prevAddress, "takeovers_since_last_line", n, "window", FlapWindow.String())
	}
}
