package report

import (
	"context"
	"sync"
	"time"

	"golang.org/x/time/rate"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/internal/auth"
	"github.com/prefixroute/prefixroute/internal/state"
)

// reportMsg is one message of a report stream, as the engine reads it.
type reportMsg struct {
	reports []*pb.ReportLoadRequest // applied in order
	closed  []*pb.InstanceRef       // ended cleanly after the reports
	ackMs   uint32                  // ack_interval_ms (read from the first message only)
}

// reportWire is what one RPC adds to the report engine: how its messages
// read and how its acks are sent (engine.go has the two).
type reportWire interface {
	recv() (reportMsg, error)
	// send sends the acks of the members of due with a report pending,
	// then ended, when there is any; iv is report_interval_ms.
	send(due []*member, ended []*pb.InstanceEnded, iv uint32) error
}

// memberKey names an instance of a report stream.
type memberKey struct{ pool, instance string }

// member is one instance of a report stream: a ReportLoad stream has one,
// a ReportLoadBatch stream up to MaxBatchInstances.
type member struct {
	key     memberKey
	id      state.Identity
	sess    *state.Session
	rep     state.Report
	counts  Counter
	lim     *rate.Limiter // nil: no rate limit
	lastSeq uint64        // of the latest report checked
	ackSeq  uint64        // of the latest report applied
	pending bool          // applied and not yet acked
	queued  bool          // in reportEngine.due
	fresh   bool          // opened, its first ack not sent: acked at once
	inRun   bool          // has a report in reportEngine.run
}

// reportEngine is one report stream of either RPC. Its receive goroutine
// reads and applies each message, queueing acks; the handler's goroutine
// waits for the end and sends deferred acks; mu serialises the two and
// stop ends both. Every report goes through report: binding, rate, seq,
// identity, conversion, then the pool (flush), per member.
type reportEngine struct {
	s       *Engine
	wire    reportWire
	ctx     context.Context
	single  bool            // ReportLoad: one member, whose error ends the stream
	bound   *auth.Principal // nil: no binding to check
	who     string          // the caller's identity, for logs ("" unauthenticated)
	acks    *acker
	mu      sync.Mutex
	closed  bool
	members map[memberKey]*member
	only    *member             // single: the stream's member once opened
	due     []*member           // members with reports not yet acked (ended ones too)
	ended   []*pb.InstanceEnded // sent with the next acks, after them
	run     batchRun            // reports to apply together
	ackNow  bool                // the message's acks go out at once: a first report, or an end
	fail    error               // single: what ends the stream
	// emptySince is when the stream last had no member: its opening, or
	// the end of its last member (reap, idle.go).
	emptySince time.Time
}

// apply applies one message: each report to its member (opening it on its
// first report), then closed; a member's error ends that member alone (the
// stream, when single). Consecutive reports of distinct open members of
// one pool are applied together (run, one hold of the pool's lock); a
// report that opens a member, repeats one or changes the pool applies the
// run before it, so the order is the message's. The error returned ends
// the stream. The caller holds mu.
func (e *reportEngine) apply(m reportMsg) error {
	e.ackNow = false
	for i, r := range m.reports {
		k, mb := memberKey{r.GetPool(), r.GetInstanceId()}, e.only
		switch {
		case e.single && mb != nil:
			k = mb.key // later reports of a ReportLoad stream may leave the identity out
		case !e.single && (k.pool == "" || k.instance == ""):
			e.flush()
			return status.Errorf(codes.InvalidArgument,
				"ReportLoadBatch report %d (seq %d) has no pool or instance_id: every report of a batch names its instance", i, r.GetSeq())
		default:
			mb = e.members[k]
		}
		if mb == nil || mb.inRun || mb.sess.Pool() != e.run.pool {
			e.flush()
			mb = e.members[k] // the flush may have ended it
		}
		if err := e.report(k, mb, r); err != nil {
			e.end(k, e.members[k], err)
		}
	}
	e.flush()
	for _, c := range m.closed {
		k := memberKey{c.GetPool(), c.GetInstanceId()}
		if mb := e.members[k]; mb != nil {
			e.end(k, mb, nil)
		}
	}
	if e.fail != nil {
		return e.fail
	}
	if len(e.due) == 0 && len(e.ended) == 0 {
		return nil
	}
	return e.acks.applied(e.ackNow)
}

// report checks r, a report of member k (mb, nil when the stream does not
// hold it), and adds it to the run, or opens the member with it. An error
// ends the member (the caller's).
func (e *reportEngine) report(k memberKey, mb *member, r *pb.ReportLoadRequest) error {
	if e.bound != nil {
		if err := e.bound.CheckReport(r); err != nil {
			e.s.guard.hit(e.ctx, "binding")
			return err
		}
	}
	if mb == nil {
		mb, err := e.open(k, r)
		if err == nil {
			e.applied(mb, r)
		}
		return err
	}
	if err := e.s.guard.allow(e.ctx, mb.lim); err != nil {
		return err
	}
	if err := sameIdentity(mb.id, r); err != nil {
		return err
	}
	if r.GetSeq() < mb.lastSeq {
		if e.single {
			return status.Errorf(codes.InvalidArgument,
				"report seq %d is below the stream's last seq %d: seq must not decrease on a stream; open a new stream to start over",
				r.GetSeq(), mb.lastSeq)
		}
		return status.Errorf(codes.InvalidArgument,
			"report seq %d is below the instance's last seq %d: seq must not decrease; close the instance (closed) to start over",
			r.GetSeq(), mb.lastSeq)
	}
	mb.lastSeq = r.GetSeq()
	if err := e.s.convert(r, &mb.rep); err != nil {
		return err
	}
	e.run.add(mb, r)
	return nil
}

// open starts the session of member k from its first report r. The member
// of a ReportLoad stream uses the stream's slot; a batched one takes its
// own.
func (e *reportEngine) open(k memberKey, r *pb.ReportLoadRequest) (*member, error) {
	s, g := e.s, e.s.guard
	what := "first report of a stream: "
	if !e.single {
		if len(e.members) >= MaxBatchInstances {
			return nil, status.Errorf(codes.ResourceExhausted,
				"this ReportLoadBatch stream holds %d instances, the limit is %d; open another stream", len(e.members), MaxBatchInstances)
		}
		what = "first report of an instance on the stream: "
	}
	id := state.Identity{Pool: k.pool, Deployment: r.GetDeployment(), Instance: k.instance, Address: r.GetAddress()}
	if err := s.reg.ValidateIdentity(id); err != nil {
		return nil, status.Error(s.h.Code(err), what+err.Error())
	}
	mb := &member{key: k, id: id, lastSeq: r.GetSeq(), fresh: true, lim: g.limiter()}
	if err := s.convert(r, &mb.rep); err != nil {
		return nil, err
	}
	if !e.single {
		if err := g.take(e.ctx, "report streams"); err != nil {
			return nil, err
		}
	}
	if err := g.allow(e.ctx, mb.lim); err != nil {
		e.giveSlot()
		return nil, err
	}
	pool, err := s.reg.Ensure(id.Pool)
	if err != nil {
		e.giveSlot()
		return nil, s.h.Status(err)
	}
	mb.counts = s.h.Metrics.Reporting(id.Pool, id.Deployment) // once the pool exists: metrics label known pools only
	// Before Connect: from here on, other replicas' events for this
	// instance no longer drive it, so none can replace the new session.
	s.h.Replicas.StreamOpened(id.Pool, id.Instance)
	if mb.sess, err = pool.ConnectIf(s.now(), id, e.covers()); err != nil {
		s.h.Replicas.StreamEnded(id.Pool, id.Instance, false)
		e.giveSlot()
		return nil, e.refused(id, err)
	}
	e.tookOver(id, mb.sess)
	e.members[k] = mb
	if e.single {
		e.only = mb
	}
	s.h.Log.Debug("report stream opened", "pool", id.Pool, "deployment", id.Deployment, "instance", id.Instance,
		"address", id.Address, "batched", !e.single)
	if err := mb.sess.Report(s.now(), &mb.rep); err != nil {
		return mb, e.s.replacedError(mb.id)
	}
	return mb, nil
}

// giveSlot releases a batched member's slot.
func (e *reportEngine) giveSlot() {
	if !e.single {
		e.s.guard.give()
	}
}

// flush applies the run to its pool and acks or ends each member of it.
func (e *reportEngine) flush() {
	rn := &e.run
	if len(rn.mbs) == 0 {
		return
	}
	rn.pool.ReportAll(e.s.now(), rn.sess, rn.reps, rn.errs)
	for i, mb := range rn.mbs {
		mb.inRun = false
		if rn.errs[i] != nil {
			e.end(mb.key, mb, e.s.replacedError(mb.id))
			continue
		}
		e.applied(mb, rn.msgs[i])
	}
	rn.reset()
}

// applied passes mb's applied report r on (metrics, replicas) and queues
// its ack.
func (e *reportEngine) applied(mb *member, r *pb.ReportLoadRequest) {
	mb.counts.Reported()
	e.s.h.Replicas.Reported(mb.id, r)
	if !mb.queued {
		mb.queued = true
		e.due = append(e.due, mb)
	}
	e.ackNow = e.ackNow || mb.fresh
	mb.pending, mb.ackSeq = true, r.GetSeq()
}

// end ends member k (mb, nil when it never opened): its session closes,
// and the next response carries its last ack (it stays in due), then its
// end with err's code (OK when err is nil). On a ReportLoad stream err
// ends the stream instead.
func (e *reportEngine) end(k memberKey, mb *member, err error) {
	e.ackNow = true
	if e.single {
		if e.fail == nil {
			e.fail = err
		}
	} else {
		st := status.Convert(err)
		e.ended = append(e.ended, &pb.InstanceEnded{Instance: &pb.InstanceRef{Pool: k.pool, InstanceId: k.instance},
			Code: int32(st.Code()), Message: st.Message()})
	}
	if mb != nil {
		e.release(mb)
	}
}

// release closes mb's session and forgets it.
func (e *reportEngine) release(mb *member) {
	s := e.s
	delete(e.members, mb.key)
	if len(e.members) == 0 {
		e.emptySince = time.Now()
	}
	s.h.Replicas.StreamEnded(mb.id.Pool, mb.id.Instance, true)
	mb.sess.Close(s.now())
	e.giveSlot()
}

// emit sends the acks of the members with reports not yet acked, then the
// ends. The caller holds mu (it is the acker's emit).
func (e *reportEngine) emit() error {
	err := e.wire.send(e.due, e.ended, e.s.reportIntervalMs())
	for _, mb := range e.due {
		mb.pending, mb.queued, mb.fresh = false, false, false
	}
	clear(e.due)
	e.due, e.ended = e.due[:0], nil
	return err
}

// stop ends the loop: pending acks go out when the stream can still carry
// them, every member's session closes, and the receive goroutine applies
// and sends nothing more.
func (e *reportEngine) stop() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.closed = true
	e.acks.close()
	for _, mb := range e.members {
		e.release(mb)
	}
}
