package server

import (
	"encoding/json"
	"sync"
)

// maxRecentDecisions is how many of the decision log's latest lines the
// daemon keeps in memory for the console's Explain page (all pools
// together): 64 lines of a few KiB each.
const maxRecentDecisions = 64

// recentLines is a ring of the decision log's latest lines with their
// pools. The writer goroutine adds to it, off the pick path. Safe for
// concurrent use.
type recentLines struct {
	mu    sync.Mutex
	pools [maxRecentDecisions]string
	lines [maxRecentDecisions][]byte
	next  int // the slot the next line goes to
	n     int // lines held, up to maxRecentDecisions
}

// add keeps line (which the caller no longer modifies) as pool's.
func (r *recentLines) add(pool string, line []byte) {
	r.mu.Lock()
	r.pools[r.next], r.lines[r.next] = pool, line
	r.next = (r.next + 1) % maxRecentDecisions
	r.n = min(r.n+1, maxRecentDecisions)
	r.mu.Unlock()
}

// of returns pool's lines, newest first.
func (r *recentLines) of(pool string) []json.RawMessage {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := []json.RawMessage{}
	for k := 1; k <= r.n; k++ {
		i := (r.next - k + maxRecentDecisions) % maxRecentDecisions
		if r.pools[i] == pool {
			out = append(out, r.lines[i])
		}
	}
	return out
}
