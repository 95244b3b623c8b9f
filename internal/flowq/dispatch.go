package flowq

import "time"

// Settlement is how the holder of a grant ends it (Settle).
type Settlement uint8

const (
	// Dispatched: the retried pick got an instance; the ticket leaves and
	// the grant passes to the next ticket.
	Dispatched Settlement = iota
	// Saturated: the pool is still saturated; the ticket goes back to the
	// head of its flow, its tokens refunded, and no ticket is granted
	// until the next Kick.
	Saturated
	// Gone: the holder leaves without dispatching (canceled, its deadline,
	// another error); the grant passes to the next ticket.
	Gone
)

// Kick returns every parked ticket to the dispatch order and grants the
// next ticket when none holds a grant, and returns it (nil when a grant is
// outstanding or nothing waits). Call it when capacity may have freed
// anywhere in the pool (KickKey when only under one key).
func (q *Queue) Kick() *Ticket {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.unparkAll()
	if q.inflight != nil {
		return nil
	}
	return q.grant()
}

// Settle ends t's grant (see Settlement) and returns the ticket granted
// next, if any. Settling a ticket that holds no grant does nothing.
func (q *Queue) Settle(t *Ticket, how Settlement) *Ticket {
	q.mu.Lock()
	defer q.mu.Unlock()
	if t.state != granted || q.inflight != t {
		return nil
	}
	q.inflight = nil
	switch how {
	case Saturated:
		f := q.flowOf(t)
		f.served -= min(f.served, t.charged)
		q.requeue(t)
		q.requeueDeadline(t)
		q.stats.Requeued++
		return nil
	case Dispatched:
		t.state = left
		q.stats.Dispatched++
	default:
		t.state = left
		q.stats.Passed++
	}
	return q.grant()
}

// requeueDeadline puts a requeued ticket with a deadline back in the heap.
func (q *Queue) requeueDeadline(t *Ticket) {
	if !t.item.Deadline.IsZero() {
		q.deadline.add(t)
	}
}

// grant takes the next ticket by the dispatch order (highest band; in it the
// waiting flow with the fewest tokens dispatched, the earliest head on a
// tie; its head), charges its flow and signals it. Called with mu held.
func (q *Queue) grant() *Ticket {
	if len(q.bands) == 0 {
		return nil
	}
	var best *flow
	for _, f := range q.bands[0].flows {
		if best == nil || f.served < best.served || (f.served == best.served && f.head.seq < best.head.seq) {
			best = f
		}
	}
	t := best.head
	t.charged = max(t.item.Tokens, 1)
	best.served += t.charged
	q.unlink(t)
	t.state, q.inflight = granted, t
	t.ready <- struct{}{}
	return t
}

// Cancel takes a waiting (or parked) t out of the queue: it leaves with err (ErrCanceled
// or ErrQueueTimeout). It returns false when t is not waiting: it holds a
// grant (its holder must Settle it) or has left.
func (q *Queue) Cancel(t *Ticket, err error) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if t.state != waiting && t.state != held {
		return false
	}
	q.leave(t, err)
	return true
}

// leave removes the waiting t with err and counts it. Called with mu held.
func (q *Queue) leave(t *Ticket, err error) {
	if t.state == held {
		q.dropParked(t)
	} else {
		q.unlink(t)
	}
	t.state, t.err = left, err
	if err == ErrQueueTimeout {
		q.stats.Timeout++
	} else {
		q.stats.Canceled++
	}
}

// Expire makes every waiting ticket whose deadline is at or before now
// leave with ErrQueueTimeout, signals each, and returns how many left.
func (q *Queue) Expire(now time.Time) int { return len(q.Expired(now, nil)) }

// Expired is Expire appending the tickets that left to dst, earliest
// deadline first (for a caller that waits for none of them, such as a
// simulation loop).
func (q *Queue) Expired(now time.Time, dst []*Ticket) []*Ticket {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.deadline) > 0 && !q.deadline[0].item.Deadline.After(now) {
		t := q.deadline[0]
		q.leave(t, ErrQueueTimeout)
		t.ready <- struct{}{}
		dst = append(dst, t)
	}
	return dst
}

// Len is the number of tickets waiting in the dispatch order (neither a
// granted one nor the parked ones, Held, are counted).
func (q *Queue) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.n
}

// Stats returns the queue's counters.
func (q *Queue) Stats() Stats {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.stats
}
