package server

import (
	"context"
	"errors"
	"fmt"

	"github.com/prefixroute/prefixroute/server/cluster"
	"github.com/prefixroute/prefixroute/server/store"
)

// ErrClusterUnavailable is the error of a configuration change while the
// cluster's bucket cannot be reached: the change was not made anywhere.
var ErrClusterUnavailable = errors.New("cluster configuration store (NATS) unreachable: nothing was changed; routing goes on with the last configuration")

// maxChangeAttempts bounds the compare-and-set retries of one change that
// keeps losing to concurrent writers of the same pool.
const maxChangeAttempts = 8

// applyEdit makes one configuration change: in the local store, or, when
// clustered, in the bucket (then the local copy). Called with adminMu held.
func (s *Server) applyEdit(pool string, e store.Edit, caller string) (store.PoolConfig, error) {
	if s.repl == nil {
		return s.store.Change(pool, e, caller)
	}
	return s.repl.change(pool, e, caller)
}

// change applies e to the pool's configuration in the bucket by
// compare-and-set on the key's revision, retrying when another replica
// wrote in between (the edit's own checks, such as expected_version, then
// see the other write). The result is then kept in the local store.
func (r *replica) change(pool string, e store.Edit, caller string) (store.PoolConfig, error) {
	l := r.link.Load()
	if l == nil || l.State() != cluster.StateConnected {
		return store.PoolConfig{}, ErrClusterUnavailable
	}
	key := configKey(pool)
	for attempt := 0; ; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), r.cfg.ApplyTimeout)
		cur, rev, err := r.current(ctx, l, pool, key)
		if err != nil {
			cancel()
			return store.PoolConfig{}, err
		}
		next, err := e.Apply(cur, r.s.opts.Now())
		if err != nil {
			cancel()
			return store.PoolConfig{}, err
		}
		data, err := store.EncodePoolConfig(next)
		if err != nil {
			cancel()
			return store.PoolConfig{}, err
		}
		if rev == 0 {
			_, err = l.Create(ctx, key, data)
		} else {
			_, err = l.Update(ctx, key, data, rev)
		}
		cancel()
		switch {
		case err == nil:
			if _, merr := r.s.store.Mirror(pool, next, caller); merr != nil {
				// The change is made (the bucket holds it); only the local
				// copy for a restart without NATS is behind.
				r.s.log.Error("configuration changed in the cluster but not in the local data dir", "pool", pool, "error", merr)
			}
			return next, nil
		case (errors.Is(err, cluster.ErrRevisionMismatch) || errors.Is(err, cluster.ErrExists)) && attempt+1 < maxChangeAttempts:
			continue
		case errors.Is(err, cluster.ErrUnavailable):
			return store.PoolConfig{}, fmt.Errorf("%w: %v", ErrClusterUnavailable, err)
		}
		return store.PoolConfig{}, fmt.Errorf("%w: pool %q: %v", store.ErrPersist, pool, err)
	}
}

// current returns the pool's configuration in the bucket and its revision;
// revision 0 when the bucket has none yet, with the local copy as the
// configuration (a pool configured before clustering was turned on).
func (r *replica) current(ctx context.Context, l *cluster.Link, pool, key string) (store.PoolConfig, uint64, error) {
	ent, err := l.Get(ctx, key)
	switch {
	case errors.Is(err, cluster.ErrNotFound):
		pc, _ := r.s.store.Pool(pool)
		return pc, 0, nil
	case errors.Is(err, cluster.ErrUnavailable):
		return store.PoolConfig{}, 0, fmt.Errorf("%w: %v", ErrClusterUnavailable, err)
	case err != nil:
		return store.PoolConfig{}, 0, fmt.Errorf("%w: pool %q: %v", store.ErrPersist, pool, err)
	}
	pc, err := store.DecodePoolConfig(ent.Value)
	if err != nil {
		return store.PoolConfig{}, 0, fmt.Errorf("pool %q in the cluster bucket: %w", pool, err)
	}
	return pc, ent.Revision, nil
}

// mirror puts a configuration decided in the bucket in force here.
func (s *Server) mirror(pool string, value []byte, caller string) error {
	pc, err := store.DecodePoolConfig(value)
	if err != nil {
		return err
	}
	s.adminMu.Lock()
	defer s.adminMu.Unlock()
	if _, err := s.store.Mirror(pool, pc, caller); err != nil {
		s.log.Error("cluster configuration in force but not kept in the local data dir", "pool", pool, "error", err)
	}
	return s.publish(pool, pc)
}
