package store

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prefixroute/prefixroute/internal/rollout"
	"github.com/prefixroute/prefixroute/scheduler"
)

// PoolConfig is the durable configuration of one pool. It is a value: the
// Weights map and the Policy a Store returns are copies, and the store
// copies what it is given.
type PoolConfig struct {
	// Weights holds the weight of each deployment; nil means never set (the
	// pool splits equally).
	Weights map[string]float64
	// WeightsVersion is 0 until the first SetWeights and grows by 1 with
	// every successful one. It is the compare-and-set token of SetWeights.
	WeightsVersion uint64
	// Policy is the scheduling policy; nil means never set (the default
	// policy applies).
	Policy *scheduler.Policy
	// PolicyVersion is 0 until the first SetPolicy and grows by 1 with every
	// successful one.
	PolicyVersion uint64
	// Ramp is the pool's last weight ramp, active or ended; nil when it
	// never had one. While it is active (running or paused) it owns the
	// weights: SetWeights fails with ErrRampActive.
	Ramp *rollout.Ramp
	// UpdatedAt is the time of the last change of any of these, in UTC.
	UpdatedAt time.Time
}

// clone returns a copy of c sharing no memory with it.
func (c PoolConfig) clone() PoolConfig {
	c.Weights = maps.Clone(c.Weights)
	if c.Policy != nil {
		p := *c.Policy
		c.Policy = &p
	}
	if c.Ramp != nil {
		r := c.Ramp.Clone()
		c.Ramp = &r
	}
	return c
}

// Options configures Open. The zero value is ready to use.
type Options struct {
	// Now returns the time of a change. Default time.Now.
	Now func() time.Time
	// SeenTTL is how long a pool stays in the seen set (NoteSeen) after
	// its instances were last seen. Default DefaultSeenTTL (24 h).
	SeenTTL time.Duration
	// MaxSeenPools bounds the seen set. Default DefaultMaxSeenPools (1024).
	MaxSeenPools int

	// fs is where the store writes; nil means the OS. Tests inject faults.
	fs fileSystem
}

// Store is the durable configuration of every pool: weights and policies,
// kept in memory and in dir/state.json, every change recorded in
// dir/audit.log.
//
// Every method is safe for concurrent use. Changes are serialized by one
// mutex held across the version check, the writes and the update of memory,
// so of two concurrent SetWeights with the same expectedVersion exactly one
// succeeds and the other gets ErrVersionMismatch. Reads never wait for a
// change's disk writes: they see the configuration before it until it is
// durable, then the one after.
type Store struct {
	dir, statePath, auditPath string
	seenPath                  string
	now                       func() time.Time
	fs                        fileSystem
	seenTTL                   time.Duration
	maxSeen                   int

	pools atomic.Pointer[map[string]PoolConfig] // immutable once stored
	seen  atomic.Pointer[map[string]time.Time]  // the seen set (seen.go); immutable once stored

	seenDirty bool // the seen set differs from seen.json; guarded by mu

	mu     sync.Mutex // serializes changes and Close
	onDisk []byte     // the state file's content; nil when there is no file
	lock   *os.File   // nil once closed
}

// Open opens the store in dir, creating dir (mode 0700) if needed, and
// restores the configuration from dir/state.json if it exists. It takes an
// exclusive lock on dir until Close: a second Open of the same dir, by this
// or another process, fails with ErrLocked. A state file that cannot be read
// or parsed fails with ErrCorruptState naming the file, which is left as it
// is: the store never starts empty in place of a configuration it lost.
func Open(dir string, opts Options) (*Store, error) {
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create data dir: %w", err)
	}
	lock, err := lockDir(dir)
	if err != nil {
		return nil, err
	}
	s := &Store{
		dir:       dir,
		statePath: filepath.Join(dir, stateFileName),
		auditPath: filepath.Join(dir, auditFileName),
		seenPath:  filepath.Join(dir, seenFileName),
		now:       opts.Now,
		fs:        opts.fs,
		seenTTL:   opts.SeenTTL,
		maxSeen:   opts.MaxSeenPools,
		lock:      lock,
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.seenTTL <= 0 {
		s.seenTTL = DefaultSeenTTL
	}
	if s.maxSeen <= 0 {
		s.maxSeen = DefaultMaxSeenPools
	}
	if s.fs == nil {
		s.fs = osFS{}
	}
	pools, raw, err := loadState(s.statePath)
	var seen map[string]time.Time
	if err == nil {
		seen, err = loadSeen(s.seenPath, s.maxSeen)
	}
	if err == nil {
		err = s.prepareFiles()
	}
	if err != nil {
		_ = lock.Close() // err is the one to report
		return nil, err
	}
	s.onDisk = raw
	s.pools.Store(&pools)
	s.seen.Store(&seen)
	return s, nil
}

// prepareFiles removes a temporary state file left by a crash and creates
// the audit log, so that AuditLogPath names an existing file.
func (s *Store) prepareFiles() error {
	for _, tmp := range []string{s.statePath + ".tmp", s.seenPath + ".tmp"} {
		if err := s.fs.Remove(tmp); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("remove stale temporary file: %w", err)
		}
	}
	f, err := s.fs.OpenFile(s.auditPath, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("open audit log: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close audit log: %w", err)
	}
	return syncDir(s.fs, s.dir)
}

// Pools returns a copy of the configuration of every pool ever configured.
func (s *Store) Pools() map[string]PoolConfig {
	cur := *s.pools.Load()
	out := make(map[string]PoolConfig, len(cur))
	for name, c := range cur {
		out[name] = c.clone()
	}
	return out
}

// Pool returns a copy of the configuration of one pool, and false if the
// pool was never configured.
func (s *Store) Pool(name string) (PoolConfig, bool) {
	c, ok := (*s.pools.Load())[name]
	return c.clone(), ok
}

// Change applies e to a copy of pool's configuration, makes the result
// durable and audited, then publishes it and returns it. The edit's checks
// (a compare-and-set, a ramp's state) run under the store's lock, so
// concurrent changes are serialized. If a write fails, the error wraps
// ErrPersist and nothing changed.
func (s *Store) Change(pool string, e Edit, caller string) (PoolConfig, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lock == nil {
		return PoolConfig{}, ErrClosed
	}
	cur := *s.pools.Load()
	old := cur[pool]
	now := s.now().UTC()
	next, err := e.Apply(old, now)
	if err != nil {
		return PoolConfig{}, err
	}
	return s.commit(cur, pool, e.kind, caller, old, next)
}

// commit makes next pool's configuration in place of old: durable, audited
// as kind, then published. Called with s.mu held; cur is the published map.
func (s *Store) commit(cur map[string]PoolConfig, pool, kind, caller string, old, next PoolConfig) (PoolConfig, error) {
	now := next.UpdatedAt
	rec, err := newAuditRecord(now, caller, pool, kind, old, next)
	if err != nil {
		return PoolConfig{}, fmt.Errorf("pool %q: %w", pool, err)
	}
	pools := maps.Clone(cur)
	pools[pool] = next
	if err := s.persist(pools, rec); err != nil {
		return PoolConfig{}, fmt.Errorf("%w: pool %q: %v", ErrPersist, pool, err)
	}
	s.pools.Store(&pools)
	return next.clone(), nil
}

// persist writes the state file for pools, then appends rec to the audit
// log. If either fails it puts the previous state file back, so that the
// file matches memory, which the caller leaves unchanged.
func (s *Store) persist(pools map[string]PoolConfig, rec auditRecord) error {
	data, err := encodeState(pools)
	if err != nil {
		return fmt.Errorf("encode state: %w", err)
	}
	replaced, err := writeFileAtomic(s.fs, s.statePath, data)
	if err == nil {
		if err = appendAudit(s.fs, s.auditPath, rec); err == nil {
			s.onDisk = data
			return nil
		}
	} else {
		err = fmt.Errorf("write %s: %w", s.statePath, err)
	}
	if replaced {
		if rerr := s.restore(); rerr != nil {
			return fmt.Errorf("%v; restoring the previous %s also failed (it may hold the new configuration until the next successful change): %v",
				err, s.statePath, rerr)
		}
	}
	return err
}

// restore puts back the state file as it was before the change being
// undone: the same bytes, or no file.
func (s *Store) restore() error {
	if s.onDisk == nil {
		return removeFile(s.fs, s.statePath)
	}
	_, err := writeFileAtomic(s.fs, s.statePath, s.onDisk)
	return err
}

// AuditLogPath returns the path of the audit log: one JSON object per line,
// described in the package documentation.
func (s *Store) AuditLogPath() string { return s.auditPath }

// Dir returns the data dir, made absolute.
func (s *Store) Dir() string { return s.dir }

// Close releases the lock on the data dir. Reads keep working; changes fail
// with ErrClosed. Close is idempotent.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lock == nil {
		return nil
	}
	err := s.lock.Close() // closing the descriptor releases the flock
	s.lock = nil
	return err
}
