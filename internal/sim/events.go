package sim

import (
	"container/heap"
	"time"
)

// eventKind says what an event does when it fires.
type eventKind uint8

const (
	evArrival    eventKind = iota // the workload's next request arrives
	evBatchDone                   // an instance's prefill batch completes
	evDecodeDone                  // a request finishes decoding
	evReport                      // an instance reports its load to the routers
	evWeights                     // the weight schedule's next step
	evTick                        // once per virtual second: sampling, progress
	evProbe                       // the readiness probe asks router 0
	evQueued                      // a routed request reaches its instance (RunOptions.RouteDelays)
)

// event is one entry of the queue. Events fire in (at, seq) order, so two
// events at the same virtual time fire in the order they were scheduled:
// that, and seeded RNGs, make a run deterministic.
type event struct {
	at   time.Duration // virtual time since the start of the run
	seq  uint64
	kind eventKind
	inst int32 // instance index (batch, decode, report) or schedule index
	req  *Request
}

// eventQueue is a min-heap of events (container/heap). Not safe for
// concurrent use: one simulation loop owns it.
type eventQueue struct {
	items []event
	seq   uint64
}

func (q *eventQueue) Len() int { return len(q.items) }

func (q *eventQueue) Less(i, j int) bool {
	a, b := &q.items[i], &q.items[j]
	if a.at != b.at {
		return a.at < b.at
	}
	return a.seq < b.seq
}

func (q *eventQueue) Swap(i, j int) { q.items[i], q.items[j] = q.items[j], q.items[i] }

// Push and Pop implement heap.Interface; use push and pop.
func (q *eventQueue) Push(x any) { q.items = append(q.items, x.(event)) }

func (q *eventQueue) Pop() any {
	n := len(q.items) - 1
	e := q.items[n]
	q.items[n] = event{}
	q.items = q.items[:n]
	return e
}

// push schedules e, stamping it with the next sequence number.
func (q *eventQueue) push(e event) {
	e.seq = q.seq
	q.seq++
	heap.Push(q, e)
}

// pop removes and returns the earliest event; the queue must not be empty.
func (q *eventQueue) pop() event { return heap.Pop(q).(event) }

// peek returns the time of the earliest event and whether there is one.
func (q *eventQueue) peek() (time.Duration, bool) {
	if len(q.items) == 0 {
		return 0, false
	}
	return q.items[0].at, true
}
