package flowq

// Parking: a granted pick whose own choice is full while the rest of the
// pool may have room (its drawn deployment, scheduler.ErrDeploymentSaturated)
// leaves the dispatch order under a key (the deployment) until capacity
// under that key may have freed (KickKey, or a Kick of the whole queue).
// The grant passes on at once, so the picks behind it, for other
// deployments, are not blocked by it (no head-of-line blocking across
// deployments). A parked ticket still waits: it counts against the limits,
// in Len's complement Held, and leaves at its deadline or when canceled.

// parking is the FIFO of the tickets parked under one key, linked through
// their prev/next (a parked ticket is in no flow).
type parking struct {
	head, tail *Ticket
	n          int
}

// Park ends t's grant with the pick's own choice full: t leaves the
// dispatch order under key, its tokens refunded to its flow, until KickKey
// (key) or Kick; the grant passes to the next ticket, which Park returns.
// Parking a ticket that holds no grant does nothing.
func (q *Queue) Park(t *Ticket, key string) *Ticket {
	q.mu.Lock()
	defer q.mu.Unlock()
	if t.state != granted || q.inflight != t {
		return nil
	}
	q.inflight = nil
	f := q.flowOf(t)
	f.served -= min(f.served, t.charged)
	if q.parked == nil {
		q.parked, q.parkedBand = make(map[string]*parking), make(map[int32]int)
	}
	pk := q.parked[key]
	if pk == nil {
		pk = &parking{}
		q.parked[key] = pk
	}
	t.key, t.state = key, held
	if pk.tail == nil {
		pk.head, pk.tail = t, t
	} else {
		t.prev, pk.tail.next, pk.tail = pk.tail, t, t
	}
	pk.n++
	q.nHeld++
	q.parkedBand[t.item.Priority]++
	q.requeueDeadline(t)
	q.stats.Held++
	return q.grant()
}

// KickKey returns the tickets parked under key to the dispatch order and,
// when no grant is outstanding, grants the next ticket and returns it. Call
// it when capacity under key may have freed (a load report or an outcome
// of that deployment).
func (q *Queue) KickKey(key string) *Ticket {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.unpark(key)
	if q.inflight != nil {
		return nil
	}
	return q.grant()
}

// Nudge grants the next ticket when no grant is outstanding, without
// returning parked tickets (a first waiter: capacity may have freed since
// its own try).
func (q *Queue) Nudge() *Ticket {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.inflight != nil {
		return nil
	}
	return q.grant()
}

// Held is the number of parked tickets (waiting, out of the dispatch
// order until their key is kicked).
func (q *Queue) Held() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.nHeld
}

// unpark returns the tickets parked under key to their flows, each at the
// head: walking the parking from its tail restores FCFS within each flow
// (a ticket is parked from its flow's head, so it came before every ticket
// of its flow still waiting, and after those of its flow parked earlier).
// Called with mu held.
func (q *Queue) unpark(key string) {
	pk := q.parked[key]
	if pk == nil {
		return
	}
	delete(q.parked, key)
	for t := pk.tail; t != nil; {
		prev := t.prev
		t.prev, t.next = nil, nil
		q.nHeld--
		q.unparkBand(t.item.Priority)
		q.requeue(t)
		t = prev
	}
}

// unparkAll returns every parked ticket to the dispatch order. Called with
// mu held.
func (q *Queue) unparkAll() {
	for key := range q.parked {
		q.unpark(key)
	}
}

// unparkBand counts one ticket of band p out of the parking. Called with
// mu held.
func (q *Queue) unparkBand(p int32) {
	if q.parkedBand[p]--; q.parkedBand[p] == 0 {
		delete(q.parkedBand, p)
	}
}

// dropParked takes the parked t out of its parking (it leaves the queue),
// and out of the deadline heap. Called with mu held.
func (q *Queue) dropParked(t *Ticket) {
	pk := q.parked[t.key]
	cut(&pk.head, &pk.tail, t)
	if pk.n--; pk.n == 0 {
		delete(q.parked, t.key)
	}
	q.nHeld--
	q.unparkBand(t.item.Priority)
	if t.heapAt >= 0 {
		q.deadline.remove(t)
	}
}

// flowOf is t's flow as it waits now: its band's flow of t's key, or, when
// none waits, the flow t left (t was its last ticket). Called with mu held.
func (q *Queue) flowOf(t *Ticket) *flow {
	if b := q.band(t.item.Priority, false); b != nil {
		if f := b.flows[t.item.Flow]; f != nil {
			return f
		}
	}
	return t.flow
}

// requeue puts t back at the head of its flow, which keeps its counter
// when t was its last ticket (a requeue is not a flow that starts
// waiting). Called with mu held; t is in no flow.
func (q *Queue) requeue(t *Ticket) {
	b := q.band(t.item.Priority, true)
	if b.flows[t.item.Flow] == nil {
		f := t.flow
		f.band, f.head, f.tail, f.n = b, nil, nil, 0
		b.flows[f.id] = f
	}
	q.push(b, t, true)
}
