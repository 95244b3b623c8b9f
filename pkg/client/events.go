package client

// MaxEventsPerMessage is the most KV-cache block events (stored plus
// removed hashes) one load report may carry: 65536, the sidecar's default
// limit. A Reporter splits larger batches across several messages.
const MaxEventsPerMessage = 65536

// batch is a set of cache events to send: an optional clear, then removals,
// then stores. Every hash appears at most once, in stored or in removed, so
// the order in which the sidecar applies them (clear, removed, stored) gives
// the same result as applying the instance's events one by one.
type batch struct {
	cleared bool
	removed []uint64
	stored  []uint64
}

func (b *batch) events() int { return len(b.removed) + len(b.stored) }

// split cuts b into parts of at most limit events each (limit >= 1), the
// first one carrying the clear. It always returns at least one part, so that
// an empty batch still makes one (load-only) report.
func (b batch) split(limit int) []batch {
	if b.events() <= limit {
		return []batch{b}
	}
	parts := make([]batch, 0, (b.events()+limit-1)/limit)
	cur := batch{cleared: b.cleared}
	room := limit
	flush := func() {
		parts = append(parts, cur)
		cur, room = batch{}, limit
	}
	for rem := b.removed; len(rem) > 0; {
		n := min(room, len(rem))
		cur.removed, rem, room = rem[:n:n], rem[n:], room-n
		if room == 0 {
			flush()
		}
	}
	for st := b.stored; len(st) > 0; {
		n := min(room, len(st))
		cur.stored, st, room = st[:n:n], st[n:], room-n
		if room == 0 {
			flush()
		}
	}
	if room < limit {
		flush()
	}
	return parts
}

// cacheBook is a Reporter's record of the instance's KV cache: the set of
// blocks it holds (when the Reporter tracks it itself) and the events not
// yet sent on the current stream. Not safe for concurrent use: the
// Reporter's mutex guards it.
type cacheBook struct {
	track bool                // keep held up to date (no Snapshot callback)
	held  map[uint64]struct{} // the instance's blocks, when tracking
	live  bool                // a stream is open: queue events for it

	cleared bool
	order   []uint64        // pending hashes, in the order first seen
	stored  map[uint64]bool // pending hash → stored (true) or removed (false)
}

func newCacheBook(track bool) *cacheBook {
	b := &cacheBook{track: track, stored: make(map[uint64]bool)}
	if track {
		b.held = make(map[uint64]struct{})
	}
	return b
}

// event records one stored or removed block.
func (b *cacheBook) event(h uint64, stored bool) {
	if b.track {
		if stored {
			b.held[h] = struct{}{}
		} else {
			delete(b.held, h)
		}
	}
	if !b.live {
		return
	}
	if _, seen := b.stored[h]; !seen {
		b.order = append(b.order, h)
	}
	b.stored[h] = stored
}

// clear records that the instance dropped its whole cache.
func (b *cacheBook) clear() {
	if b.track {
		clear(b.held)
	}
	b.resetPending()
	b.cleared = b.live
}

func (b *cacheBook) resetPending() {
	b.cleared = false
	b.order = b.order[:0]
	clear(b.stored)
}

// begin starts a stream: pending events are dropped (the stream opens with a
// snapshot) and later events are queued. When tracking, it returns a copy of
// the held blocks, the snapshot.
func (b *cacheBook) begin() []uint64 {
	b.resetPending()
	b.live = true
	if !b.track {
		return nil
	}
	snap := make([]uint64, 0, len(b.held))
	for h := range b.held {
		snap = append(snap, h)
	}
	return snap
}

// end stops queueing events: the next stream starts with a snapshot.
func (b *cacheBook) end() {
	b.live = false
	b.resetPending()
}

// take returns the pending events and forgets them.
func (b *cacheBook) take() batch {
	out := batch{cleared: b.cleared}
	for _, h := range b.order {
		if b.stored[h] {
			out.stored = append(out.stored, h)
		} else {
			out.removed = append(out.removed, h)
		}
	}
	b.resetPending()
	return out
}

// pending is the number of queued events.
func (b *cacheBook) pending() int { return len(b.order) }
