package server

import (
	"context"
	"sync"

	"golang.org/x/time/rate"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/internal/auth"
	"github.com/prefixroute/prefixroute/internal/state"
)

// Limits of a ReportLoadBatch stream (SECURITY.md lists them). Each
// instance on the stream also holds one of --max-report-streams and has the
// token bucket of a report stream (--max-reports-per-second).
const (
	// MaxBatchReports is the most reports one ReportLoadBatchRequest may
	// carry; a message with more ends the stream with InvalidArgument.
	MaxBatchReports = 256
	// MaxBatchInstances is the most instances one ReportLoadBatch stream
	// may hold at once; the first report of one more ends that instance
	// with ResourceExhausted.
	MaxBatchInstances = 1024
)

type batchStream = grpc.BidiStreamingServer[pb.ReportLoadBatchRequest, pb.ReportLoadBatchResponse]

// ReportLoadBatch implements LoadService.ReportLoadBatch: the ReportLoad
// streams of several instances on one stream (batchLoop). The stream ends
// OK after the client's CloseSend, once every report is acked.
func (ls *loadService) ReportLoadBatch(stream batchStream) error {
	s := ls.s
	first, err := stream.Recv()
	if err != nil {
		return recvError(err)
	}
	if err := checkAckInterval(first.GetAckIntervalMs(), "first message"); err != nil {
		return err
	}
	ctx := stream.Context()
	b := &batchLoop{ls: ls, stream: stream, ctx: ctx, guard: guardFrom(ctx), members: make(map[memberKey]*member)}
	if c := auth.CallerFrom(ctx); c != nil && c.Bind != nil {
		b.bound = c.Principal
	}
	b.acks = newAcker(s, first.GetAckIntervalMs(), b.emit)
	defer b.stop()
	b.mu.Lock()
	err = b.apply(first)
	b.mu.Unlock()
	if err != nil {
		return err
	}
	ended := make(chan error, 1)
	go b.receive(ended)
	return s.awaitEnd(ctx, ended, b.acks, &b.mu, nil, nil)
}

// memberKey names an instance of a batch stream.
type memberKey struct{ pool, instance string }

// member is one instance of a ReportLoadBatch stream: what a reportLoop
// holds for its single instance.
type member struct {
	key     memberKey
	id      state.Identity
	sess    *state.Session
	rep     state.Report
	counts  *depObs
	lim     *rate.Limiter // nil without a guard
	lastSeq uint64        // of the latest report checked
	ackSeq  uint64        // of the latest report applied
	pending bool          // applied and not yet acked
	queued  bool          // in batchLoop.due
	fresh   bool          // opened, its first ack not sent: acked at once
	inRun   bool          // has a report in batchLoop.run
}

// batchLoop is one ReportLoadBatch stream. Like reportLoop, its receive
// goroutine reads, applies and acks; the handler's goroutine waits for the
// end and sends deferred acks; mu serialises the two and stop ends both.
type batchLoop struct {
	ls      *loadService
	stream  batchStream
	ctx     context.Context
	guard   *streamGuard    // nil: no limits counted (a server without a daemon)
	bound   *auth.Principal // nil: no binding to check
	acks    *acker
	mu      sync.Mutex
	closed  bool
	members map[memberKey]*member
	due     []*member           // members with reports not yet acked (ended ones too)
	ended   []*pb.InstanceEnded // sent with the next acks, after them
	run     batchRun            // reports to apply together
	ackNow  bool                // the message's acks go out at once: a first report, or an end
}

// receive applies the stream's messages until it ends (receiveReports).
func (b *batchLoop) receive(ended chan<- error) {
	receiveReports(b.stream.Recv, nil, b.apply, &b.mu, &b.closed, b.acks, ended)
}

// apply applies one message: each report to its instance (opening it on
// its first report), then closed; an instance's error ends that instance
// alone. Consecutive reports of distinct open instances of one pool are
// applied together (run, one hold of the pool's lock); a report that
// opens an instance, repeats one or changes the pool applies the run
// before it, so the order is the message's. The error returned ends the
// stream. The caller holds mu.
func (b *batchLoop) apply(m *pb.ReportLoadBatchRequest) error {
	if n := len(m.GetReports()); n > MaxBatchReports {
		return status.Errorf(codes.InvalidArgument,
			"ReportLoadBatch message with %d reports: the limit is %d; send the rest in the next message", n, MaxBatchReports)
	}
	b.ackNow = false
	for i, r := range m.GetReports() {
		k := memberKey{r.GetPool(), r.GetInstanceId()}
		if k.pool == "" || k.instance == "" {
			b.flush()
			return status.Errorf(codes.InvalidArgument,
				"ReportLoadBatch report %d (seq %d) has no pool or instance_id: every report of a batch names its instance", i, r.GetSeq())
		}
		mb := b.members[k]
		if mb == nil || mb.inRun || mb.sess.Pool() != b.run.pool {
			b.flush()
			mb = b.members[k] // the flush may have ended it
		}
		if err := b.report(k, mb, r); err != nil {
			b.end(k, b.members[k], err)
		}
	}
	b.flush()
	for _, c := range m.GetClosed() {
		k := memberKey{c.GetPool(), c.GetInstanceId()}
		if mb := b.members[k]; mb != nil {
			b.end(k, mb, nil)
		}
	}
	if len(b.due) == 0 && len(b.ended) == 0 {
		return nil
	}
	return b.acks.applied(b.ackNow)
}

// report checks r, a report of instance k (mb, nil when the stream does
// not hold it), and adds it to the run, or opens the instance with it. An
// error ends the instance (the caller's).
func (b *batchLoop) report(k memberKey, mb *member, r *pb.ReportLoadRequest) error {
	if b.bound != nil {
		if err := b.bound.CheckReport(r); err != nil {
			b.guard.hit(b.ctx, "binding")
			return err
		}
	}
	if mb == nil {
		mb, err := b.open(k, r)
		if err == nil {
			b.applied(mb, r)
		}
		return err
	}
	if b.guard != nil {
		if err := b.guard.allow(b.ctx, mb.lim); err != nil {
			return err
		}
	}
	if err := sameIdentity(mb.id, r); err != nil {
		return err
	}
	if r.GetSeq() < mb.lastSeq {
		return status.Errorf(codes.InvalidArgument,
			"report seq %d is below the instance's last seq %d: seq must not decrease; close the instance (closed) to start over",
			r.GetSeq(), mb.lastSeq)
	}
	mb.lastSeq = r.GetSeq()
	if err := b.ls.convert(r, &mb.rep); err != nil {
		return err
	}
	b.run.add(mb, r)
	return nil
}

// flush applies the run to its pool and acks or ends each instance of it.
func (b *batchLoop) flush() {
	rn := &b.run
	if len(rn.mbs) == 0 {
		return
	}
	rn.pool.ReportAll(b.ls.s.opts.Now(), rn.sess, rn.reps, rn.errs)
	for i, mb := range rn.mbs {
		mb.inRun = false
		if rn.errs[i] != nil {
			b.end(mb.key, mb, replacedError(mb.id))
			continue
		}
		b.applied(mb, rn.msgs[i])
	}
	rn.reset()
}

// applied passes mb's applied report r on (metrics, replicas) and queues
// its ack.
func (b *batchLoop) applied(mb *member, r *pb.ReportLoadRequest) {
	mb.counts.reported()
	b.ls.s.repl.Reported(mb.id, r)
	if !mb.queued {
		mb.queued = true
		b.due = append(b.due, mb)
	}
	b.ackNow = b.ackNow || mb.fresh
	mb.pending, mb.ackSeq = true, r.GetSeq()
}

// batchRun is the reports of one message that go to one pool together:
// one each of distinct open instances, checked and converted (mb.rep).
type batchRun struct {
	pool *state.Pool // nil while empty
	mbs  []*member
	msgs []*pb.ReportLoadRequest
	sess []*state.Session
	reps []*state.Report
	errs []error
}

func (rn *batchRun) add(mb *member, r *pb.ReportLoadRequest) {
	rn.pool = mb.sess.Pool()
	mb.inRun = true
	rn.mbs, rn.msgs = append(rn.mbs, mb), append(rn.msgs, r)
	rn.sess, rn.reps, rn.errs = append(rn.sess, mb.sess), append(rn.reps, &mb.rep), append(rn.errs, nil)
}

// reset empties the run, keeping its arrays.
func (rn *batchRun) reset() {
	clear(rn.mbs)
	clear(rn.msgs)
	clear(rn.sess)
	clear(rn.reps)
	clear(rn.errs)
	rn.pool, rn.mbs, rn.msgs, rn.sess, rn.reps, rn.errs = nil, rn.mbs[:0], rn.msgs[:0], rn.sess[:0], rn.reps[:0], rn.errs[:0]
}

// open starts the session of instance k from its first report r on the
// stream, as ReportLoad does with a stream's first report.
func (b *batchLoop) open(k memberKey, r *pb.ReportLoadRequest) (*member, error) {
	s := b.ls.s
	if len(b.members) >= MaxBatchInstances {
		return nil, status.Errorf(codes.ResourceExhausted,
			"this ReportLoadBatch stream holds %d instances, the limit is %d; open another stream", len(b.members), MaxBatchInstances)
	}
	id := state.Identity{Pool: k.pool, Deployment: r.GetDeployment(), Instance: k.instance, Address: r.GetAddress()}
	if err := s.reg.ValidateIdentity(id); err != nil {
		return nil, status.Error(codeOf(err), "first report of an instance on the stream: "+err.Error())
	}
	mb := &member{key: k, id: id, lastSeq: r.GetSeq(), counts: s.obs.reporting(id.Pool, id.Deployment), fresh: true}
	if err := b.ls.convert(r, &mb.rep); err != nil {
		return nil, err
	}
	if b.guard != nil {
		if err := b.guard.take(b.ctx, "report streams"); err != nil {
			return nil, err
		}
		mb.lim = b.guard.limiter()
		if err := b.guard.allow(b.ctx, mb.lim); err != nil {
			b.guard.give()
			return nil, err
		}
	}
	pool, err := s.reg.Ensure(id.Pool)
	if err != nil {
		b.giveSlot()
		return nil, statusOf(err)
	}
	s.repl.StreamOpened(id.Pool, id.Instance)
	if mb.sess, err = pool.Connect(s.opts.Now(), id); err != nil {
		s.repl.StreamEnded(id.Pool, id.Instance, false)
		b.giveSlot()
		return nil, statusOf(err)
	}
	if prev, ok := mb.sess.TookOver(); ok {
		s.tookOver(b.ctx, id, prev)
	}
	b.members[k] = mb
	s.log.Debug("batched instance opened", "pool", id.Pool, "deployment", id.Deployment, "instance", id.Instance, "address", id.Address)
	if err := mb.sess.Report(s.opts.Now(), &mb.rep); err != nil {
		return mb, replacedError(mb.id)
	}
	return mb, nil
}

func (b *batchLoop) giveSlot() {
	if b.guard != nil {
		b.guard.give()
	}
}

// end ends instance k (mb: its member, nil when it never opened): its
// session closes, and the next response carries its last ack (it stays in
// due), then its end with err's code (OK when err is nil).
func (b *batchLoop) end(k memberKey, mb *member, err error) {
	b.ackNow = true
	st := status.Convert(err)
	b.ended = append(b.ended, &pb.InstanceEnded{Instance: &pb.InstanceRef{Pool: k.pool, InstanceId: k.instance},
		Code: int32(st.Code()), Message: st.Message()})
	if mb != nil {
		b.release(mb)
	}
}

// release closes mb's session and forgets it.
func (b *batchLoop) release(mb *member) {
	s := b.ls.s
	delete(b.members, mb.key)
	s.repl.StreamEnded(mb.id.Pool, mb.id.Instance, true)
	mb.sess.Close(s.opts.Now())
	b.giveSlot()
}

// emit sends the acks of every instance with reports not yet acked (of
// every instance, when the cluster asked for the caches again), then the
// ends. Each send has a message of its own: gRPC may read a sent message
// later. The caller holds mu (it is the acker's emit).
func (b *batchLoop) emit(resend bool) error {
	out := &pb.ReportLoadBatchResponse{Acks: make([]*pb.InstanceAck, 0, len(b.due)), Ended: b.ended}
	iv := b.ls.s.reportIntervalMs()
	ack := func(mb *member) {
		out.Acks = append(out.Acks, &pb.InstanceAck{Instance: &pb.InstanceRef{Pool: mb.key.pool, InstanceId: mb.key.instance},
			Ack: &pb.ReportLoadResponse{Seq: mb.ackSeq, ReportIntervalMs: iv, ResendCache: resend}})
		mb.pending, mb.queued, mb.fresh = false, false, false
	}
	if resend {
		// Every instance is told, those ended since the last ack too.
		for _, mb := range b.members {
			ack(mb)
		}
		for _, mb := range b.due {
			if b.members[mb.key] != mb {
				ack(mb)
			}
		}
	} else {
		for _, mb := range b.due {
			if mb.pending {
				ack(mb)
			}
		}
	}
	clear(b.due)
	b.due, b.ended = b.due[:0], nil
	if len(out.Acks) == 0 && len(out.Ended) == 0 {
		return nil
	}
	return b.stream.Send(out)
}

// stop ends the loop: pending acks go out when the stream can still carry
// them, every instance's session closes, and the receive goroutine applies
// and sends nothing more.
func (b *batchLoop) stop() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	b.acks.close()
	for _, mb := range b.members {
		b.release(mb)
	}
}
