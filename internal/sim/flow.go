package sim

import (
	"errors"
	"fmt"
	"time"

	"github.com/prefixroute/prefixroute/internal/flowq"
	"github.com/prefixroute/prefixroute/internal/state"
	"github.com/prefixroute/prefixroute/scheduler"
)

// simQueue is one router replica's waiting room: under on_saturation:
// queue the production internal/flowq.Queue, driven in virtual time (the
// simulator plays the callers: it retries a granted request's pick and
// settles the grant, as server/flow.go does), or the same queue behind
// the llm-d-style gate (Variant.Gate). Not safe for concurrent use.
type simQueue struct {
	q    *flowq.Queue
	reqs map[*flowq.Ticket]*Request
	ttl  time.Duration
	gone []*flowq.Ticket // scratch of Expired
	// waiting counts the waiting requests by class (Result.Contended).
	waiting []int
}

// drop forgets t's request, which left the queue, and returns it.
func (sq *simQueue) drop(t *flowq.Ticket) *Request {
	r := sq.reqs[t]
	delete(sq.reqs, t)
	if r.Class >= 0 && r.Class < len(sq.waiting) {
		sq.waiting[r.Class]--
	}
	return r
}

// contended reports whether every class has a request waiting.
func (sq *simQueue) contended() bool {
	for _, n := range sq.waiting {
		if n == 0 {
			return false
		}
	}
	return len(sq.waiting) > 0
}

// newQueues returns one simQueue per router when rc's variant queues
// (on_saturation: queue, or a gate), else nil.
func newQueues(rc *runConfig) []*simQueue {
	if rc.variant.Gate == "" && rc.policy.OnSaturation != scheduler.SaturationQueue {
		return nil
	}
	qs := make([]*simQueue, rc.routers)
	for i := range qs {
		qs[i] = &simQueue{q: flowq.New(flowq.Limits{MaxWaiting: int(rc.policy.QueueMaxWaiting), MaxPerBand: int(rc.policy.QueueMaxPerBand)}),
			reqs: make(map[*flowq.Ticket]*Request), ttl: rc.policy.QueueTTL, waiting: make([]int, len(rc.sc.Workload.Classes))}
		qs[i].q.KeepDisplaced()
	}
	return qs
}

// classFlow is r's priority and flow by its class (a trace's unknown class:
// 0 and "default").
func (e *engine) classFlow(r *Request) (int32, string) {
	cl := e.rc.sc.Workload.Classes
	if r.Class < 0 || r.Class >= len(cl) {
		return 0, flowq.DefaultFlow
	}
	f := cl[r.Class].Flow
	if f == "" {
		f = cl[r.Class].Name
	}
	return cl[r.Class].Priority, f
}

// hold puts r in its router's queue, or rejects it (sheddable, over a
// limit).
func (e *engine) hold(sq *simQueue, r *Request) {
	prio, flow := e.classFlow(r)
	t, err := sq.q.Enqueue(epoch.Add(e.now), flowq.Item{Flow: flow, Priority: prio, Tokens: uint64(r.PromptTokens),
		Deadline: epoch.Add(e.now + sq.ttl)})
	if err != nil {
		e.m.reject(r)
		return
	}
	sq.reqs[t] = r
	if r.Class >= 0 && r.Class < len(sq.waiting) {
		sq.waiting[r.Class]++
	}
	sq.gone = sq.q.Displaced(sq.gone[:0])
	for _, d := range sq.gone {
		e.m.reject(sq.drop(d))
	}
}

// gateClosed reports whether router k must hold requests back before
// picking: the llm-d-style gate of the latest reports (Variant.Gate).
func (e *engine) gateClosed() bool {
	if e.rc.variant.Gate != "llmd" || len(e.lastLoad) == 0 {
		return false
	}
	sum := 0.0
	for _, l := range e.lastLoad {
		sum += max(float64(l.WaitingRequests)/5, l.KVCacheUsage/0.8)
	}
	return sum/float64(len(e.lastLoad)) >= 1
}

// release runs after a report: in every queue, requests past their
// deadline are rejected, then grants go out one at a time while picks find
// capacity (the retried pick of a granted request; behind the gate, while
// the gate is open).
func (e *engine) release() error {
	for k, sq := range e.queues {
		sq.gone = sq.q.Expired(epoch.Add(e.now), sq.gone[:0])
		for _, t := range sq.gone {
			e.m.reject(sq.drop(t))
		}
		for t := sq.q.Kick(); t != nil; {
			<-t.Ready()
			r := sq.reqs[t]
			if e.gateClosed() {
				sq.q.Settle(t, flowq.Saturated)
				break
			}
			i, err := e.routers[k].pick(e.now, r)
			switch {
			case errors.Is(err, scheduler.ErrDeploymentSaturated):
				t = sq.q.Park(t, r.HeldBy) // the grant passes on
			case errors.Is(err, scheduler.ErrSaturated):
				sq.q.Settle(t, flowq.Saturated)
				t = nil
			case err != nil && (errors.Is(err, scheduler.ErrNoEligibleInstance) || errors.Is(err, scheduler.ErrAllWeightsZero) ||
				errors.Is(err, scheduler.ErrSLOUnattainable)):
				e.m.reject(sq.drop(t))
				t = sq.q.Settle(t, flowq.Gone)
			case err != nil:
				return fmt.Errorf("pick of queued request %d at %v: %w", r.ID, e.now, err)
			default:
				if sq.contended() && r.Class >= 0 && r.Class < len(sq.waiting) {
					e.m.contended(len(sq.waiting), r)
				}
				sq.drop(t)
				e.place(i, r)
				t = sq.q.Settle(t, flowq.Dispatched)
			}
		}
	}
	return nil
}

// noteLoad keeps instance k's latest report figures for the gate.
func (e *engine) noteLoad(k int, rep *state.Report) {
	if e.rc.variant.Gate == "" {
		return
	}
	if e.lastLoad == nil {
		e.lastLoad = make([]state.Report, len(e.insts))
	}
	e.lastLoad[k] = state.Report{WaitingRequests: rep.WaitingRequests, KVCacheUsage: rep.KVCacheUsage}
}
