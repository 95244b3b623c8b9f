package flowq

import (
	"cmp"
	"slices"
	"time"
)

// BandLen is one band's waiting tickets. A plain value.
type BandLen struct {
	Priority int32
	// Waiting counts the band's waiting tickets, Held the parked ones
	// among them (Queue.Park: their deployment is full).
	Waiting, Held int
	Flows         int       // flows with a waiting ticket in the band
	Oldest        time.Time // when the band's longest-waiting ticket entered
}

// FlowLen is one flow's waiting tickets in one band. A plain value.
type FlowLen struct {
	Priority int32
	Flow     string
	Waiting  int
	Oldest   time.Time // when the flow's longest-waiting ticket entered
}

// PoolQueue is one pool's waiting room as Snapshot and Detail report it. A
// plain value.
type PoolQueue struct {
	Pool string
	// At is when the snapshot was taken (the Rooms' clock), read after
	// the bands and flows, so At minus an Oldest, how long that ticket has
	// waited, is never negative.
	At    time.Time
	Bands []BandLen // non-empty bands, highest priority first
	// Flows (Detail only) are the waiting flows, by band (highest first),
	// in a band by waiting tickets (most first), then the oldest first,
	// then by name; at most the perBand of Detail per band.
	Flows []FlowLen
	// Stats are the counters since the Rooms started, including those of
	// the pool's queues KickAll dropped while idle.
	Stats Stats
}

// add is s plus o, counter by counter.
func (s Stats) add(o Stats) Stats {
	return Stats{Enqueued: s.Enqueued + o.Enqueued, Dispatched: s.Dispatched + o.Dispatched, Requeued: s.Requeued + o.Requeued,
		Full: s.Full + o.Full, Timeout: s.Timeout + o.Timeout, Canceled: s.Canceled + o.Canceled,
		Sheddable: s.Sheddable + o.Sheddable, Passed: s.Passed + o.Passed, Held: s.Held + o.Held}
}

// Bands appends the non-empty bands, highest priority first, to dst; a
// band's parked tickets count in its Waiting and Held (not in its Flows
// and Oldest).
func (q *Queue) Bands(dst []BandLen) []BandLen {
	q.mu.Lock()
	defer q.mu.Unlock()
	from := len(dst)
	for _, b := range q.bands {
		h := q.parkedBand[b.priority]
		dst = append(dst, BandLen{Priority: b.priority, Waiting: b.n + h, Held: h, Flows: len(b.flows), Oldest: b.oldest()})
	}
	for p, h := range q.parkedBand {
		if q.band(p, false) == nil {
			dst = append(dst, BandLen{Priority: p, Waiting: h, Held: h})
		}
	}
	if len(q.parkedBand) > 0 {
		slices.SortFunc(dst[from:], func(x, y BandLen) int { return cmp.Compare(y.Priority, x.Priority) })
	}
	return dst
}

// oldest is when b's longest-waiting ticket entered: the earliest head of
// its flows (a flow is FIFO; a requeued grant goes back to its head).
// Called with the queue's mu held.
func (b *band) oldest() time.Time {
	var t time.Time
	for _, f := range b.flows {
		if e := f.head.enqueued; t.IsZero() || e.Before(t) {
			t = e
		}
	}
	return t
}

// Flows appends the waiting flows of each band (highest priority first)
// to dst: in a band the flows with the most waiting tickets, then the
// oldest head, then by name; at most perBand per band (at least 1).
func (q *Queue) Flows(dst []FlowLen, perBand int) []FlowLen {
	q.mu.Lock()
	defer q.mu.Unlock()
	perBand = max(perBand, 1)
	for _, b := range q.bands {
		from := len(dst)
		for _, f := range b.flows {
			dst = append(dst, FlowLen{Priority: b.priority, Flow: f.id, Waiting: f.n, Oldest: f.head.enqueued})
		}
		slices.SortFunc(dst[from:], func(x, y FlowLen) int {
			if c := cmp.Compare(y.Waiting, x.Waiting); c != 0 {
				return c
			}
			if c := x.Oldest.Compare(y.Oldest); c != 0 {
				return c
			}
			return cmp.Compare(x.Flow, y.Flow)
		})
		dst = dst[:min(len(dst), from+perBand)]
	}
	return dst
}

// Snapshot appends, per pool that has queued a pick since the Rooms
// started, its bands and counters to dst, in no order (for the gauges).
func (r *Rooms) Snapshot(dst []PoolQueue) []PoolQueue {
	r.mu.RLock()
	defer r.mu.RUnlock()
	for name, q := range r.pools {
		bands := q.Bands(nil)
		// At after the read: no ticket read entered after it, so no wait
		// is negative.
		dst = append(dst, PoolQueue{Pool: name, At: r.now(), Bands: bands, Stats: r.dropped[name].add(q.Stats())})
	}
	for name, st := range r.dropped {
		if r.pools[name] == nil {
			dst = append(dst, PoolQueue{Pool: name, At: r.now(), Stats: st})
		}
	}
	return dst
}

// Detail is pool's waiting room with its flows, at most perBand per band
// (for the console), and whether a pick of pool has queued since the Rooms
// started.
func (r *Rooms) Detail(pool string, perBand int) (PoolQueue, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	pq := PoolQueue{Pool: pool}
	st, seen := r.dropped[pool]
	pq.Stats = st
	if q := r.pools[pool]; q != nil {
		pq.Bands, pq.Flows = q.Bands(nil), q.Flows(nil, perBand)
		pq.Stats = st.add(q.Stats())
		seen = true
	}
	pq.At = r.now() // after the read: no wait is negative
	return pq, seen
}
