package replica

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go"

	"github.com/prefixroute/prefixroute/internal/cluster"
	"github.com/prefixroute/prefixroute/internal/store"
)

// ErrClusterUnavailable is the error of a configuration change while the
// cluster's bucket cannot be reached: the change was not made anywhere.
var ErrClusterUnavailable = errors.New("cluster configuration store (NATS) unreachable: nothing was changed; routing goes on with the last configuration")

// errUnconfirmed is the error of a configuration change the bucket did not
// confirm in time and could not be read back: unlike ErrClusterUnavailable,
// the change may have been made. It is ErrClusterUnavailable for errors.Is.
type errUnconfirmed struct {
	pool  string
	cause error
}

func (e *errUnconfirmed) Error() string {
	return fmt.Sprintf("cluster configuration store (NATS) did not confirm the change of pool %q in time and could not be read back: "+
		"the change may or may not have been made; read the pool's configuration ('prefixctl weights get', 'prefixctl policy get') before retrying: %v", e.pool, e.cause)
}

func (e *errUnconfirmed) Is(target error) bool { return target == ErrClusterUnavailable }

// staleCopyError is the error of a change made on a replica whose copy of
// the pool's configuration is behind the bucket (another replica changed
// it a moment ago and the watch has not delivered it yet): the request was
// prepared from the old copy (StartRamp's start weights), so it is refused
// rather than applied to the newer configuration. The copy is brought up
// to date first, so a retry works. It is store.ErrVersionMismatch for
// errors.Is.
type staleCopyError struct {
	pool          string
	have, current uint64 // bucket revisions: in force here, in the bucket
}

func (e *staleCopyError) Error() string {
	return fmt.Sprintf("%v: pool %q was changed on another replica (cluster revision %d; this replica had revision %d): "+
		"nothing was changed; this replica is now up to date, read the configuration again and retry",
		store.ErrVersionMismatch, e.pool, e.current, e.have)
}

func (e *staleCopyError) Is(target error) bool { return target == store.ErrVersionMismatch }

// maxChangeAttempts bounds the compare-and-set retries of one change that
// keeps losing to concurrent writers of the same pool.
const maxChangeAttempts = 8

// configKeyPrefix starts every pool's key in the bucket: "pool." and the
// pool name as cluster.EncodeToken makes it.
const configKeyPrefix = "pool."

func configKey(pool string) string { return configKeyPrefix + cluster.EncodeToken(pool) }

// Change applies e to pool's configuration in the bucket by compare-and-set
// on the key's revision, retrying when another replica wrote in between
// (the edit's own checks, such as an expected version, then see the other
// write), and keeps the result in the local store. It does not put the
// result in force: the host does, under its lock, which it holds for the
// call. An edit computed from the host's copy (store.Edit.FromCopy) while
// that copy is behind the bucket is refused (an error that is
// store.ErrVersionMismatch) unless the newest configuration refuses it
// first; the copy is then brought up to date. While NATS is away the error
// is ErrClusterUnavailable (nothing was changed); a write that timed out
// and could not be read back is ErrClusterUnavailable too, saying that it
// may have been made.
func (r *Replica) Change(pool string, e store.Edit, caller string) (store.PoolConfig, error) {
	l := r.link.Load()
	if l == nil || l.State() != cluster.StateConnected {
		return store.PoolConfig{}, ErrClusterUnavailable
	}
	r.cfgMu.Lock()
	defer r.cfgMu.Unlock()
	key := configKey(pool)
	for attempt := 0; ; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), r.cfg.ApplyTimeout)
		cur, rev, err := r.current(ctx, l, pool, key)
		if err != nil {
			cancel()
			return store.PoolConfig{}, err
		}
		next, err := e.Apply(cur, r.now())
		if err != nil { // refused on its own terms by the newest configuration
			cancel()
			return store.PoolConfig{}, err
		}
		if have := r.revs[pool]; attempt == 0 && rev > have && e.FromCopy() {
			// The caller prepared the edit from a copy older than the
			// bucket: catch up, and let it prepare the edit again.
			cancel()
			if err := r.keep(pool, cur, rev, fmt.Sprintf("cluster bucket %s revision %d", r.cfg.Bucket, rev)); err != nil {
				return store.PoolConfig{}, err
			}
			return store.PoolConfig{}, &staleCopyError{pool: pool, have: have, current: rev}
		}
		data, err := store.EncodePoolConfig(next)
		if err != nil {
			cancel()
			return store.PoolConfig{}, err
		}
		var written uint64
		if rev == 0 {
			written, err = l.Create(ctx, key, data)
		} else {
			written, err = l.Update(ctx, key, data, rev)
		}
		cancel()
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) {
			// A write that timed out may have been made: read it back.
			written, err = r.confirm(l, pool, key, data, rev, err)
		}
		switch {
		case err == nil:
			if _, merr := r.h.Store().Mirror(pool, next, caller); merr != nil {
				// The change is made (the bucket holds it); only the local
				// copy for a restart without NATS is behind.
				r.log.Error("configuration changed in the cluster but not in the local data dir", "pool", pool, "error", merr)
			}
			r.revs[pool] = max(r.revs[pool], written)
			return next, nil
		case (errors.Is(err, cluster.ErrRevisionMismatch) || errors.Is(err, cluster.ErrExists)) && attempt+1 < maxChangeAttempts:
			continue
		case errors.Is(err, ErrClusterUnavailable):
			return store.PoolConfig{}, err
		case errors.Is(err, cluster.ErrUnavailable):
			return store.PoolConfig{}, fmt.Errorf("%w: %v", ErrClusterUnavailable, err)
		}
		return store.PoolConfig{}, fmt.Errorf("%w: pool %q: %v", store.ErrPersist, pool, err)
	}
}

// confirm settles a write of data to key (over revision rev) that timed
// out with writeErr: it may still have been made. It reads the key back
// once: holding data, the write was made (its revision is returned);
// holding another value at a newer revision, it was not and never will be
// (the compare-and-set is stale: ErrClusterUnavailable, nothing was
// changed); otherwise the outcome is unknown (errUnconfirmed).
func (r *Replica) confirm(l *cluster.Link, pool, key string, data []byte, rev uint64, writeErr error) (uint64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), r.cfg.ApplyTimeout)
	defer cancel()
	ent, err := l.Get(ctx, key)
	switch {
	case err == nil && ent.Revision > rev && bytes.Equal(ent.Value, data):
		r.log.Warn("cluster configuration write confirmed by reading it back", "pool", pool, "revision", ent.Revision, "error", writeErr)
		return ent.Revision, nil
	case err == nil && ent.Revision > rev:
		return 0, fmt.Errorf("%w: %v", ErrClusterUnavailable, writeErr)
	}
	return 0, &errUnconfirmed{pool: pool, cause: writeErr}
}

// current returns the pool's configuration in the bucket and its revision;
// revision 0 when the bucket has none yet, with the local copy as the
// configuration (a pool configured before clustering was turned on).
func (r *Replica) current(ctx context.Context, l *cluster.Link, pool, key string) (store.PoolConfig, uint64, error) {
	ent, err := l.Get(ctx, key)
	switch {
	case errors.Is(err, cluster.ErrNotFound):
		pc, _ := r.h.Store().Pool(pool)
		return pc, 0, nil
	case errors.Is(err, cluster.ErrUnavailable), errors.Is(err, context.DeadlineExceeded):
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

// onConfig applies a pool's configuration changed in the bucket
// (cluster.Handlers.OnConfig): kept in the local data dir (the last-known
// copy for a restart without NATS) and put in force.
func (r *Replica) onConfig(key string, value []byte, revision uint64, deleted bool) {
	tok, ok := strings.CutPrefix(key, configKeyPrefix)
	if !ok || deleted {
		return
	}
	pool, err := cluster.DecodeToken(tok)
	if err == nil {
		err = r.mirror(pool, value, revision, fmt.Sprintf("cluster bucket %s revision %d", r.cfg.Bucket, revision))
	}
	if err != nil {
		r.log.Error("cluster configuration not applied", "key", key, "revision", revision, "error", err)
	}
}

// mirror puts a configuration decided in the bucket at revision in force
// here, unless this replica has that revision or a newer one in force
// already: its own write coming back through the watch, or an older
// revision the watch delivers after this replica wrote a newer one (which
// would otherwise roll the local copy and the pool back for a moment, and
// durably so if the process died then).
func (r *Replica) mirror(pool string, value []byte, revision uint64, caller string) error {
	pc, err := store.DecodePoolConfig(value)
	if err != nil {
		return err
	}
	return r.h.Locked(func() error {
		r.cfgMu.Lock()
		defer r.cfgMu.Unlock()
		if revision <= r.revs[pool] {
			return nil
		}
		return r.keep(pool, pc, revision, caller)
	})
}

// keep puts pc, the bucket's configuration of pool at revision, in force
// here and in the local data dir. Called with the host's lock and cfgMu
// held.
func (r *Replica) keep(pool string, pc store.PoolConfig, revision uint64, caller string) error {
	if _, err := r.h.Store().Mirror(pool, pc, caller); err != nil {
		r.log.Error("cluster configuration in force but not kept in the local data dir", "pool", pool, "error", err)
	}
	if err := r.h.Install(pool, pc); err != nil {
		return err
	}
	r.revs[pool] = max(r.revs[pool], revision)
	return nil
}
