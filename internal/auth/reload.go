package auth

import (
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// DefaultReloadInterval is how often, at most, the TLS files and the tokens
// file are checked for a change.
const DefaultReloadInterval = 2 * time.Second

// ReloadStats counts what the reloading of a set of files did since it
// started.
type ReloadStats struct {
	// Checks are the times the files were looked at (at most one per
	// reload interval, by a call that finds the interval passed).
	Checks int64
	// Reloads are the checks that found a change and loaded it.
	Reloads int64
	// Failures are the checks that found a change and could not load it:
	// the value in force was kept.
	Failures int64
}

// reloader holds a value loaded from files and loads it again when one of
// them changes (modification time, size or inode: a Kubernetes secret
// update swaps a symlink, which changes the inode). Files are checked at
// most once per interval, by the call that finds the interval passed; a
// failed reload (say, a certificate written before its key) keeps the value
// in force, logs why and retries at every check until a load succeeds.
// Safe for concurrent use.
type reloader[T any] struct {
	what  string // for the logs: "TLS certificate", "tokens file"
	files []string
	load  func() (*T, error)
	every time.Duration
	log   *slog.Logger
	now   func() time.Time

	cur  atomic.Pointer[T]
	next atomic.Int64 // unix nanoseconds of the next check
	mu   sync.Mutex   // one check at a time
	seen []fileStamp  // of files, as last loaded (or failed)

	checks, reloads, failures atomic.Int64
}

// fileStamp is what a change of a file changes.
type fileStamp struct {
	mod  time.Time
	size int64
	ino  uint64
	err  bool
}

func stampOf(path string) fileStamp {
	fi, err := os.Stat(path)
	if err != nil {
		return fileStamp{err: true}
	}
	s := fileStamp{mod: fi.ModTime(), size: fi.Size()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		s.ino = st.Ino
	}
	return s
}

// newReloader loads the value once; that first load must succeed. A
// non-positive every is DefaultReloadInterval.
func newReloader[T any](what string, files []string, every time.Duration, log *slog.Logger, load func() (*T, error)) (*reloader[T], error) {
	if every <= 0 {
		every = DefaultReloadInterval
	}
	r := &reloader[T]{what: what, files: files, load: load, every: every, log: log, now: time.Now}
	r.seen = r.stamps()
	v, err := load()
	if err != nil {
		return nil, err
	}
	r.cur.Store(v)
	r.next.Store(r.now().Add(every).UnixNano())
	return r, nil
}

func (r *reloader[T]) stamps() []fileStamp {
	out := make([]fileStamp, len(r.files))
	for i, f := range r.files {
		out[i] = stampOf(f)
	}
	return out
}

// get returns the value in force, first reloading it if the interval passed
// and a file changed.
func (r *reloader[T]) get() *T {
	if now := r.now().UnixNano(); now >= r.next.Load() && r.mu.TryLock() {
		r.check(now)
		r.mu.Unlock()
	}
	return r.cur.Load()
}

// stats returns the counts of checks and reloads so far.
func (r *reloader[T]) stats() ReloadStats {
	return ReloadStats{Checks: r.checks.Load(), Reloads: r.reloads.Load(), Failures: r.failures.Load()}
}

// check reloads when a file changed since the last attempt. Called with mu
// held; counted once it is done.
func (r *reloader[T]) check(now int64) {
	defer r.checks.Add(1)
	r.next.Store(now + r.every.Nanoseconds())
	st := r.stamps()
	changed := false
	for i := range st {
		changed = changed || st[i] != r.seen[i]
	}
	if !changed {
		return
	}
	v, err := r.load()
	if err != nil {
		r.failures.Add(1)
		r.log.Error("reload failed; keeping the "+r.what+" in force and retrying at the next check", "files", r.files, "err", err)
		return
	}
	r.seen = st
	r.cur.Store(v)
	r.reloads.Add(1)
	r.log.Info("reloaded "+r.what, "files", r.files)
}
