package flowq

import (
	"context"
	"sync"
	"time"
)

// Rooms holds the Queue of every pool that has had waiting picks, and the
// counters its metrics read. Safe for concurrent use. The zero value is not
// usable; call NewRooms.
type Rooms struct {
	mu    sync.RWMutex
	pools map[string]*Queue
	// dropped are the counters of the queues KickAll dropped, per pool,
	// so that Snapshot and Detail count since the Rooms started; at most
	// MaxDroppedPools entries.
	dropped map[string]Stats
	now     func() time.Time
	obs     *observer // nil: no metrics
}

// MaxDroppedPools bounds the pools whose counters Rooms keeps after their
// queue went idle and was dropped: 4,096 pools. Past it, a further pool's
// counters restart from 0 in Snapshot and Detail (the console) each time
// its queue is dropped; the Prometheus counters are not affected.
const MaxDroppedPools = 4096

// NewRooms returns an empty Rooms reading the time from now (time.Now when
// nil).
func NewRooms(now func() time.Time) *Rooms {
	if now == nil {
		now = time.Now
	}
	return &Rooms{pools: make(map[string]*Queue), dropped: make(map[string]Stats), now: now}
}

// queue returns pool's Queue, creating it with l (and applying l to an
// existing one when it changed).
func (r *Rooms) queue(pool string, l Limits) *Queue {
	r.mu.RLock()
	q := r.pools[pool]
	r.mu.RUnlock()
	if q == nil {
		r.mu.Lock()
		if q = r.pools[pool]; q == nil {
			q = New(l)
			r.pools[pool] = q
		}
		r.mu.Unlock()
	}
	q.mu.Lock()
	changed := q.limits != l
	q.mu.Unlock()
	if changed {
		q.SetLimits(l)
	}
	return q
}

// Busy reports whether picks wait for pool: a new pick then queues behind
// them instead of trying first (FCFS across arrivals).
func (r *Rooms) Busy(pool string) bool {
	r.mu.RLock()
	q := r.pools[pool]
	r.mu.RUnlock()
	return q != nil && q.Len() > 0
}

// Kick grants capacity to the next waiting pick of pool, if any waits and
// none holds a grant. Call it when the pool's capacity may have freed (a
// load report, an outcome). Cheap when nothing waits.
func (r *Rooms) Kick(pool string) {
	r.mu.RLock()
	q := r.pools[pool]
	r.mu.RUnlock()
	if q != nil && q.waiting() {
		q.Kick()
	}
}

// KickKey is Kick for capacity freed under key only (a report or an
// outcome of one deployment): it returns the picks parked under key to the
// dispatch order, leaves those parked under other keys, and grants the
// next pick. Cheap when nothing waits.
func (r *Rooms) KickKey(pool, key string) {
	r.mu.RLock()
	q := r.pools[pool]
	r.mu.RUnlock()
	if q != nil && q.waiting() {
		q.KickKey(key)
	}
}

// waiting reports whether any ticket waits, parked or not.
func (q *Queue) waiting() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.n+q.nHeld > 0
}

// KickAll kicks every pool with waiting picks (a periodic fallback for
// capacity the router hears of without a local event, e.g. reports applied
// from other replicas) and drops the queues of pools nothing waits for.
func (r *Rooms) KickAll() {
	r.mu.Lock()
	qs := make([]*Queue, 0, len(r.pools))
	for name, q := range r.pools {
		q.mu.Lock()
		idle := q.n == 0 && q.nHeld == 0 && q.inflight == nil
		st := q.stats
		q.mu.Unlock()
		if idle {
			if _, ok := r.dropped[name]; ok || len(r.dropped) < MaxDroppedPools {
				r.dropped[name] = r.dropped[name].add(st)
			}
			delete(r.pools, name)
			continue
		}
		qs = append(qs, q)
	}
	r.mu.Unlock()
	for _, q := range qs {
		q.Kick()
	}
}

// Hold is one pick under on_saturation: queue. try runs the pick and
// reports whether it found no capacity: saturated, with key "" when the
// pool is saturated, or the key (the drawn deployment) whose capacity
// alone is full, while others may have room (any other outcome, an
// instance or an error, ends the hold: try keeps it). When nothing waits
// in pool's dispatch order (Busy), try runs at once; if it is not
// saturated Hold returns (0, nil) without touching the queue. Otherwise the
// pick waits in pool's Queue (limits l, deadline the earlier of ttl from
// now and ctx's) and tries again each time it is granted capacity, until
// try is not saturated: Hold returns the time waited and nil. A try
// saturated under a key parks the pick (Queue.Park) until KickKey(pool,
// key) or Kick(pool), and the grant passes on at once. It returns ErrSheddable at once for a negative priority,
// ErrQueueFull over a limit, ErrQueueTimeout at the deadline and
// ErrCanceled when ctx is canceled (each wrapped with the details). Only
// the caller's goroutine waits.
func (r *Rooms) Hold(ctx context.Context, pool string, l Limits, ttl time.Duration, it Item, try func() (saturated bool, key string)) (time.Duration, error) {
	if !r.Busy(pool) {
		if saturated, _ := try(); !saturated {
			return 0, nil
		}
	}
	start := r.now()
	it.Deadline = start.Add(ttl)
	if d, ok := ctx.Deadline(); ok && d.Before(it.Deadline) {
		it.Deadline = d
	}
	q := r.queue(pool, l)
	t, err := q.Enqueue(start, it)
	if err != nil {
		r.obs.rejected(pool, err)
		return 0, err
	}
	if q.Len() == 1 {
		q.Nudge() // the first waiter: capacity may have freed since try
	}
	timer := time.NewTimer(it.Deadline.Sub(start))
	defer timer.Stop()
	for {
		if err := q.Wait(ctx, t, timer.C); err != nil {
			r.obs.rejected(pool, err)
			return r.now().Sub(start), err
		}
		if r.retry(q, t, try) {
			waited := r.now().Sub(start)
			r.obs.dispatched(pool, waited)
			return waited, nil
		}
	}
}

// retry runs try for the granted t and settles the grant: true when the
// pick is done. A panic in try passes the grant on before it goes up.
func (r *Rooms) retry(q *Queue, t *Ticket, try func() (bool, string)) (done bool) {
	settled := false
	defer func() {
		if !settled {
			q.Settle(t, Gone)
		}
	}()
	saturated, key := try()
	settled = true
	switch {
	case saturated && key != "":
		q.Park(t, key)
		return false
	case saturated:
		q.Settle(t, Saturated)
		return false
	}
	q.Settle(t, Dispatched)
	return true
}
