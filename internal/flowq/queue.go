package flowq

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// Errors of a ticket that leaves without capacity. The front ends map them
// to RESOURCE_EXHAUSTED / HTTP 429 with their Reason.
var (
	// ErrQueueFull: the pool's or the band's waiting room is full.
	ErrQueueFull = errors.New("queue_full")
	// ErrQueueTimeout: the ticket's deadline passed while it waited.
	ErrQueueTimeout = errors.New("queue_timeout")
	// ErrSheddable: a sheddable (negative priority) pick on a saturated pool.
	ErrSheddable = errors.New("sheddable_rejected")
	// ErrCanceled: the caller went away (its context ended) while waiting.
	ErrCanceled = errors.New("canceled")
)

// Reason is the short reason of err as the audit, metrics and the
// x-prefixroute-dropped-reason header spell it: queue_full, queue_timeout,
// sheddable_rejected, canceled, or "" for any other error.
func Reason(err error) string {
	for _, e := range [...]error{ErrQueueFull, ErrQueueTimeout, ErrSheddable, ErrCanceled} {
		if errors.Is(err, e) {
			return e.Error()
		}
	}
	return ""
}

// DefaultFlow is the flow of a pick that names none.
const DefaultFlow = "default"

// Limits bound one Queue. A plain value.
type Limits struct {
	// MaxWaiting is the most tickets waiting in the Queue (all bands); the
	// next Enqueue is refused with ErrQueueFull. At least 1.
	MaxWaiting int
	// MaxPerBand is the most tickets waiting in one priority band. At
	// least 1.
	MaxPerBand int
}

// Item is what a waiting pick carries into the queue. A plain value.
type Item struct {
	// Flow is the fairness key (a tenant); "" is the flow "default".
	Flow string
	// Priority: higher first; negative is sheddable (refused).
	Priority int32
	// Tokens is the prompt length, what the flow is charged when the pick
	// is dispatched (at least 1 is charged).
	Tokens uint64
	// Deadline, when not zero, is when the ticket leaves with
	// ErrQueueTimeout.
	Deadline time.Time
}

// ticket states.
const (
	waiting uint8 = iota
	granted
	held // parked (Park): waiting, out of the dispatch order
	left // expired, canceled or dispatched: out of the queue for good
)

// Ticket is one waiting pick. Its methods are safe for concurrent use.
type Ticket struct {
	item     Item
	enqueued time.Time
	seq      uint64
	q        *Queue
	flow     *flow
	prev     *Ticket // in its flow's FIFO, or its parking
	next     *Ticket
	key      string // its parking's key while held
	charged  uint64 // tokens charged to its flow at its grant
	heapAt   int    // index in the deadline heap; -1 when not in it
	state    uint8
	err      error         // why it left, once state is left without a grant
	ready    chan struct{} // one send: granted or expired
}

// Ready is signaled once the ticket is granted (retry the pick, then
// Settle) or has left the queue (Err says why).
func (t *Ticket) Ready() <-chan struct{} { return t.ready }

// Enqueued is when the ticket entered the queue.
func (t *Ticket) Enqueued() time.Time { return t.enqueued }

// Priority is the ticket's band.
func (t *Ticket) Priority() int32 { return t.item.Priority }

// Err is nil while the ticket waits or holds a grant, else why it left
// without capacity (ErrQueueTimeout, ErrCanceled).
func (t *Ticket) Err() error {
	t.q.mu.Lock()
	defer t.q.mu.Unlock()
	return t.err
}

// flow is the FIFO of one fairness key in one band.
type flow struct {
	id         string
	band       *band
	head, tail *Ticket
	n          int
	served     uint64 // virtual tokens dispatched
}

// band is one priority level.
type band struct {
	priority int32
	flows    map[string]*flow // only flows with waiting tickets
	n        int
}

// Queue is one pool's waiting room. Safe for concurrent use.
type Queue struct {
	mu       sync.Mutex
	limits   Limits
	bands    []*band // by priority, highest first; only non-empty ones
	n        int
	seq      uint64
	deadline deadlineHeap
	inflight *Ticket // the outstanding grant, or nil
	stats    Stats
	// parked are the held tickets by key (Park); nHeld counts them, and
	// parkedBand by priority (for the limits).
	parked     map[string]*parking
	parkedBand map[int32]int
	nHeld      int
	// displaced are the tickets displace took out since Displaced was
	// last called, kept only when keep is set (KeepDisplaced).
	displaced []*Ticket
	keep      bool
}

// Stats counts what a Queue did. A plain value.
type Stats struct {
	Enqueued, Dispatched, Requeued             uint64
	Full, Timeout, Canceled, Sheddable, Passed uint64
	// Held counts the grants parked because the pick's own deployment
	// was full (Park).
	Held uint64
}

// New returns an empty Queue with limits l (values below 1 count as 1).
func New(l Limits) *Queue {
	q := &Queue{}
	q.SetLimits(l)
	return q
}

// SetLimits changes the limits; tickets already waiting stay.
func (q *Queue) SetLimits(l Limits) {
	l.MaxWaiting, l.MaxPerBand = max(l.MaxWaiting, 1), max(l.MaxPerBand, 1)
	q.mu.Lock()
	q.limits = l
	q.mu.Unlock()
}

// Enqueue adds a waiting ticket for it at time now. It refuses a negative
// priority with ErrSheddable and a ticket over a limit with ErrQueueFull
// (the message names the limit).
func (q *Queue) Enqueue(now time.Time, it Item) (*Ticket, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if it.Priority < 0 {
		q.stats.Sheddable++
		return nil, fmt.Errorf("%w: priority %d is sheddable and the pool is saturated", ErrSheddable, it.Priority)
	}
	if it.Flow == "" {
		it.Flow = DefaultFlow
	}
	if n := q.n + q.nHeld; n >= q.limits.MaxWaiting && (len(q.bands) == 0 || !q.displace(it, q.bands[len(q.bands)-1])) {
		q.stats.Full++
		return nil, fmt.Errorf("%w: %d picks already wait for this pool (limit queue_max_waiting %d)", ErrQueueFull, n, q.limits.MaxWaiting)
	}
	b := q.band(it.Priority, false)
	if n := q.parkedBand[it.Priority]; n > 0 || b != nil {
		if b != nil {
			n += b.n
		}
		if n >= q.limits.MaxPerBand && (b == nil || !q.displace(it, b)) {
			q.stats.Full++
			return nil, fmt.Errorf("%w: %d picks already wait in priority band %d (limit queue_max_per_band %d)", ErrQueueFull, n, it.Priority, q.limits.MaxPerBand)
		}
	}
	b = q.band(it.Priority, true)
	q.seq++
	t := &Ticket{item: it, enqueued: now, seq: q.seq, q: q, heapAt: -1, ready: make(chan struct{}, 1)}
	q.push(b, t, false)
	if !it.Deadline.IsZero() {
		q.deadline.add(t)
	}
	q.stats.Enqueued++
	return t, nil
}

// displace makes room at a limit for it by taking out the newest ticket
// of band b's flow with the most waiting tickets (then the most tokens
// dispatched; it leaves with ErrQueueFull), and returns true; or returns
// false: it is refused. It displaces when b is below it's priority
// (strict priority holds at the limit: a higher band is never refused
// while a lower one waits), or when b is its band and that flow has at
// least two more waiting tickets than it's own flow (fairness holds at the
// limit: a flooding flow cannot lock a light one out by filling the
// queue; dropping from the longest queue). Called with mu held.
func (q *Queue) displace(it Item, b *band) bool {
	if b.priority > it.Priority {
		return false
	}
	same := b.priority == it.Priority
	var victim *flow
	for _, f := range b.flows {
		if same && f.id == it.Flow {
			continue
		}
		if victim == nil || f.n > victim.n || (f.n == victim.n && (f.served > victim.served ||
			(f.served == victim.served && f.tail.seq > victim.tail.seq))) {
			victim = f
		}
	}
	if victim == nil {
		return false
	}
	if same {
		mine := 0
		if f := b.flows[it.Flow]; f != nil {
			mine = f.n
		}
		if victim.n <= mine+1 {
			return false
		}
	}
	t := victim.tail
	q.unlink(t)
	t.state, t.err = left, fmt.Errorf("%w: displaced by a pick of priority %d, flow %q (a limit of queue_max_waiting %d or queue_max_per_band %d)",
		ErrQueueFull, it.Priority, it.Flow, q.limits.MaxWaiting, q.limits.MaxPerBand)
	q.stats.Full++
	t.ready <- struct{}{}
	if q.keep {
		q.displaced = append(q.displaced, t)
	}
	return true
}

// KeepDisplaced makes the queue keep the tickets a higher priority
// displaces until Displaced collects them: for a caller that waits for
// none of its tickets, such as a simulation loop. (A Wait returns
// ErrQueueFull for a displaced ticket.)
func (q *Queue) KeepDisplaced() {
	q.mu.Lock()
	q.keep = true
	q.mu.Unlock()
}

// Displaced appends to dst the tickets a higher priority displaced since
// the last call (KeepDisplaced), and forgets them.
func (q *Queue) Displaced(dst []*Ticket) []*Ticket {
	q.mu.Lock()
	defer q.mu.Unlock()
	dst = append(dst, q.displaced...)
	clear(q.displaced)
	q.displaced = q.displaced[:0]
	return dst
}

// band returns the band of priority p, creating it when create is set
// (nil otherwise when there is none).
func (q *Queue) band(p int32, create bool) *band {
	i, found := slices.BinarySearchFunc(q.bands, p, func(b *band, p int32) int {
		switch {
		case b.priority > p:
			return -1
		case b.priority < p:
			return 1
		}
		return 0
	})
	if found {
		return q.bands[i]
	}
	if !create {
		return nil
	}
	b := &band{priority: p, flows: make(map[string]*flow)}
	q.bands = slices.Insert(q.bands, i, b)
	return b
}

// push links t into its flow of band b: at the tail, or at the head when
// front is set (a requeued grant keeps its place).
func (q *Queue) push(b *band, t *Ticket, front bool) {
	f := b.flows[t.item.Flow]
	if f == nil {
		f = &flow{id: t.item.Flow, band: b, served: b.minServed()}
		b.flows[f.id] = f
	}
	t.flow, t.state = f, waiting
	switch {
	case f.head == nil:
		f.head, f.tail = t, t
	case front:
		t.next, f.head.prev, f.head = f.head, t, t
	default:
		t.prev, f.tail.next, f.tail = f.tail, t, t
	}
	f.n++
	b.n++
	q.n++
}

// minServed is the least counter of b's waiting flows (0 when none): what a
// flow that starts waiting is lifted to.
func (b *band) minServed() uint64 {
	first, m := true, uint64(0)
	for _, f := range b.flows {
		if first || f.served < m {
			first, m = false, f.served
		}
	}
	return m
}

// unlink removes the waiting ticket t from its flow (anywhere in the FIFO, O(1)),
// and drops the flow and band when they empty.
func (q *Queue) unlink(t *Ticket) {
	f := t.flow
	cut(&f.head, &f.tail, t)
	f.n--
	f.band.n--
	q.n--
	if f.n == 0 {
		delete(f.band.flows, f.id)
		if f.band.n == 0 {
			i := slices.Index(q.bands, f.band)
			q.bands = slices.Delete(q.bands, i, i+1)
		}
	}
	if t.heapAt >= 0 {
		q.deadline.remove(t)
	}
}

// cut removes t from the doubly linked list with ends *head and *tail (a
// flow's FIFO or a parking), in O(1).
func cut(head, tail **Ticket, t *Ticket) {
	if t.prev == nil {
		*head = t.next
	} else {
		t.prev.next = t.next
	}
	if t.next == nil {
		*tail = t.prev
	} else {
		t.next.prev = t.prev
	}
	t.prev, t.next = nil, nil
}
