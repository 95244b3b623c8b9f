package decisionlog

import (
	"encoding/json"
	"sync"
)

// maxRecent is how many of the decision log's latest lines a Log
// keeps in memory for the console's Explain page (all pools
// together): 64 lines of a few KiB each.
const maxRecent = 64

// recentLines is a ring of the decision log's latest lines with their
// pools. The writer goroutine adds to it, off the pick path. Safe for
// concurrent use.
type recentLines struct {
	mu    sync.Mutex
	pools [maxRecent]string
	lines [maxRecent][]byte
	next  int // the slot the next line goes to
	n     int // lines held, up to maxRecent
}

// add keeps line (which the caller no longer modifies) as pool's.
func (r *recentLines) add(pool string, line []byte) {
	r.mu.Lock()
	r.pools[r.next], r.lines[r.next] = pool, line
	r.next = (r.next + 1) % maxRecent
	r.n = min(r.n+1, maxRecent)
	r.mu.Unlock()
}

// of returns pool's lines, newest first.
func (r *recentLines) of(pool string) []json.RawMessage {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := []json.RawMessage{}
	for k := 1; k <= r.n; k++ {
		i := (r.next - k + maxRecent) % maxRecent
		if r.pools[i] == pool {
			out = append(out, r.lines[i])
		}
	}
	return out
}
