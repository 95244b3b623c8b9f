package server

import (
	"errors"
	"fmt"

	"github.com/prefixroute/prefixroute/internal/protoconv"
	"github.com/prefixroute/prefixroute/internal/state"
	"github.com/prefixroute/prefixroute/internal/store"
)

// knownPool reports whether the router knows pool: the registry holds it
// (configured, or instances reported into it since the start), the store
// has a configuration for it, or instances reported into it within the
// seen set's TTL (store.Seen), before a restart too. Safe for concurrent
// use.
func (s *Server) knownPool(pool string) bool {
	if _, err := s.reg.Pool(pool); err == nil {
		return true
	}
	if _, ok := s.store.Pool(pool); ok {
		return true
	}
	return s.store.Seen(pool, s.opts.Now())
}

// missingPool is the error of a pick from a pool the registry does not
// hold (err wraps state.ErrPoolNotFound): state.ErrPoolWarming when the
// router knows the pool from before (knownPool), else err.
func (s *Server) missingPool(pool string, err error) error {
	if _, ok := s.store.Pool(pool); ok {
		return fmt.Errorf("%w: pool %q is configured but none of its instances has reported since the router started; retry in %d s",
			state.ErrPoolWarming, pool, protoconv.RetryAfterSeconds)
	}
	if s.store.Seen(pool, s.opts.Now()) {
		return fmt.Errorf("%w: pool %q had instances before the router restarted, none has reported again yet; retry in %d s",
			state.ErrPoolWarming, pool, protoconv.RetryAfterSeconds)
	}
	return err
}

// noteSeen records the pools that have instances now in the store's seen
// set (seen.json), so that they are known after a restart. It logs a
// failed write; the next call writes again.
func (s *Server) noteSeen() {
	var pools []string
	for _, p := range s.reg.Pools() {
		if _, n := p.Counts(); n > 0 {
			pools = append(pools, p.Name())
		}
	}
	if err := s.store.NoteSeen(pools, s.opts.Now()); err != nil && !errors.Is(err, store.ErrClosed) {
		s.log.Warn("cannot record the pools seen; after a restart their picks may answer NotFound until their instances report", "err", err)
	}
}

// newPoolRefused is the error of a configuration write to a pool the
// router does not know, without allow_new_pool: most likely a misspelt
// name.
func newPoolRefused(pool string) error {
	return fmt.Errorf("%w: %q: no weights, policy or ramp stored, no instances, none seen reporting within 24 h; check the name, or set allow_new_pool (prefixctl --create) to create it",
		state.ErrPoolNotFound, pool)
}
