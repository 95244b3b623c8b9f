package store

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"time"
)

// Limits of the seen set: the pools the router saw instances report into,
// kept in dir/seen.json so that after a restart a pool that had instances
// is known (its picks answer "warming", retryable, rather than "not
// found") until they report again.
const (
	// DefaultSeenTTL is how long a pool stays in the seen set after its
	// last instance was seen: 24 h.
	DefaultSeenTTL = 24 * time.Hour
	// DefaultMaxSeenPools bounds the seen set: 1024 pools (the registry's
	// default --max-pools). Past it the pools seen longest ago are dropped.
	DefaultMaxSeenPools = 1024
	// seenFormat is the version of seen.json this package writes and reads.
	seenFormat = 1
	// seenFileName is the seen set's file in the data dir.
	seenFileName = "seen.json"
)

// seenJSON is seen.json: {"format": 1, "pools": {name: last seen, RFC 3339}}.
type seenJSON struct {
	Format int                  `json:"format"`
	Pools  map[string]time.Time `json:"pools"`
}

// seenRefresh is how old a pool's recorded time may grow before NoteSeen
// rewrites it: a quarter of the TTL, at most 1 h, so that a pool with live
// instances costs one write an hour, not one a sweep.
func (s *Store) seenRefresh() time.Duration { return min(time.Hour, s.seenTTL/4) }

// Seen reports whether pool is in the seen set: instances reported into it
// less than the TTL (Options.SeenTTL) before now, in this process or one
// before it on the same data dir. Safe for concurrent use; it does not
// wait for a write.
func (s *Store) Seen(pool string, now time.Time) bool {
	t, ok := (*s.seen.Load())[pool]
	return ok && now.Sub(t) < s.seenTTL
}

// NoteSeen records that pools have instances at now. It adds the new ones,
// refreshes the times older than seenRefresh, drops the pools past the TTL
// and, past Options.MaxSeenPools, the ones seen longest ago; when any of
// that changed the set, it writes dir/seen.json (atomically, fsynced) before
// it returns. A failed write wraps ErrPersist; the set in memory keeps the
// change and the next NoteSeen writes it again. After Close it returns
// ErrClosed. Safe for concurrent use.
func (s *Store) NoteSeen(pools []string, now time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lock == nil {
		return ErrClosed
	}
	cur := *s.seen.Load()
	var next map[string]time.Time
	edit := func() map[string]time.Time {
		if next == nil {
			next = maps.Clone(cur)
		}
		return next
	}
	for _, p := range pools {
		if t, ok := cur[p]; !ok || now.Sub(t) >= s.seenRefresh() {
			edit()[p] = now.UTC()
		}
	}
	for p, t := range cur {
		if now.Sub(t) >= s.seenTTL {
			delete(edit(), p)
		}
	}
	if next != nil {
		trimSeen(next, s.maxSeen)
		s.seen.Store(&next)
		s.seenDirty = true
	}
	if !s.seenDirty {
		return nil
	}
	data, err := encodeSeen(*s.seen.Load())
	if err == nil {
		_, err = writeFileAtomic(s.fs, s.seenPath, data)
	}
	if err != nil {
		return fmt.Errorf("%w: seen pools: write %s: %v", ErrPersist, s.seenPath, err)
	}
	s.seenDirty = false
	return nil
}

// trimSeen drops from m the pools seen longest ago until it holds at most
// limit (ties by name, so the result does not depend on map order).
func trimSeen(m map[string]time.Time, limit int) {
	if len(m) <= limit {
		return
	}
	names := slices.SortedFunc(maps.Keys(m), func(a, b string) int {
		return cmp.Or(m[a].Compare(m[b]), cmp.Compare(a, b))
	})
	for _, p := range names[:len(m)-limit] {
		delete(m, p)
	}
}

// encodeSeen returns seen.json for m: indented, pools in name order.
func encodeSeen(m map[string]time.Time) ([]byte, error) {
	data, err := json.MarshalIndent(seenJSON{Format: seenFormat, Pools: m}, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(data, '\n'), nil
}

// loadSeen reads seen.json at path: a missing file is an empty set; a file
// that cannot be read or parsed wraps ErrCorruptState and names it. The
// oldest pools past limit are left out (those past the TTL are, by Seen
// and by the next NoteSeen).
func loadSeen(path string, limit int) (map[string]time.Time, error) {
	raw, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return map[string]time.Time{}, nil
	}
	if err != nil {
		return nil, corruptSeen(path, fmt.Sprintf("cannot read it: %v", err))
	}
	var sj seenJSON
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&sj); err != nil {
		return nil, corruptSeen(path, fmt.Sprintf("invalid content: %v", err))
	}
	if sj.Format != seenFormat {
		return nil, corruptSeen(path, fmt.Sprintf("unknown format %d; this prefixroute reads format %d only", sj.Format, seenFormat))
	}
	m := make(map[string]time.Time, len(sj.Pools))
	for name, t := range sj.Pools {
		if err := ValidatePoolName(name); err != nil {
			return nil, corruptSeen(path, err.Error())
		}
		m[name] = t
	}
	trimSeen(m, limit)
	return m, nil
}

// corruptSeen is the error of Open for an unusable seen.json.
func corruptSeen(path, detail string) error {
	return fmt.Errorf("%w %s: %s; fix it, or move it aside to start with no pools seen (their picks answer NotFound, not warming, until their instances report)",
		ErrCorruptState, path, detail)
}
