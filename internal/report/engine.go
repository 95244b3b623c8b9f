// Package report is the report-stream engine of the router: the
// ReportLoad and ReportLoadBatch streams of LoadService, run by one loop
// (a ReportLoad stream is a batch of one member). Per stream it admits the
// stream (a slot of --max-report-streams, the first-report timeout, the
// identity's waits), then per member it checks the binding, the rate, the
// seq and the identity, converts and applies the report to its pool, and
// paces the acks. It knows the router only through Host: the registry,
// the clock, the replicas and the metrics.
package report

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/internal/auth"
	"github.com/prefixroute/prefixroute/internal/protoconv"
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

// Replicas is what the engine tells the other replicas of a cluster
// (server.Replicator has it). Safe for concurrent use.
type Replicas interface {
	// StreamOpened and StreamEnded bracket a member's session on a stream;
	// closed says whether it had a session.
	StreamOpened(pool, instance string)
	StreamEnded(pool, instance string, closed bool)
	// Reported passes on a report applied from a stream of id.
	Reported(id state.Identity, m *pb.ReportLoadRequest)
}

// Counter counts the applied reports of one deployment (prefixroute_reports);
// looked up once per member. Safe for concurrent use.
type Counter interface{ Reported() }

// Metrics is where the engine counts what it saw. Safe for concurrent use.
type Metrics interface {
	// Reporting returns the counter of a member's deployment.
	Reporting(pool, deployment string) Counter
	// Takeover counts a takeover of an existing instance id by outcome.
	Takeover(pool string, outcome TakeoverOutcome)
	// IdentityFlap counts a takeover of an instance id whose stream was
	// still open.
	IdentityFlap(pool, deployment string)
}

// Host is what the engine needs of the router. Every field is required.
type Host struct {
	Registry *state.Registry
	Now      func() time.Time
	Log      *slog.Logger
	Replicas Replicas
	Metrics  Metrics
	// Status turns a core error into its gRPC status (code and reason);
	// Code is its code alone.
	Status func(error) error
	Code   func(error) codes.Code
	// Stopping is closed when the router drains: every stream ends
	// with Unavailable.
	Stopping <-chan struct{}
	// ReportInterval is the interval every ack asks for
	// (report_interval_ms).
	ReportInterval time.Duration
}

// Engine runs the report streams of one router. Safe for concurrent use;
// call Limit before the first stream.
type Engine struct {
	h         Host
	reg       *state.Registry
	guard     *streamGuard // report-stream limits (Limit); nil: none
	waits     waiting      // streams before their first message, per identity (admit.go)
	flaps     flapLog      // identity takeovers logged (flaps.go)
	takeovers flapLog      // cross-deployment takeovers logged (takeover.go)
}

// New returns the engine of h's router, with no limit in force.
func New(h Host) *Engine { return &Engine{h: h, reg: h.Registry} }

type (
	loadStream  = grpc.BidiStreamingServer[pb.ReportLoadRequest, pb.ReportLoadResponse]
	batchStream = grpc.BidiStreamingServer[pb.ReportLoadBatchRequest, pb.ReportLoadBatchResponse]
)

// ReportLoad serves LoadService.ReportLoad: the first message names the
// instance and starts its session; every message is applied, then acked
// (at once, or by a later cumulative ack when the stream set
// ack_interval_ms: acker, ack.go). It is a report stream of one member
// (stream.go) whose errors end the stream.
func (s *Engine) ReportLoad(stream loadStream) error {
	return s.serveReports(stream.Context(), &singleWire{stream: stream}, true)
}

// ReportLoadBatch serves LoadService.ReportLoadBatch: the ReportLoad
// streams of several instances on one stream; an instance's error ends
// that instance alone (InstanceEnded). The stream ends OK after the
// client's CloseSend, once every report is acked.
func (s *Engine) ReportLoadBatch(stream batchStream) error {
	return s.serveReports(stream.Context(), batchWire{stream}, false)
}

// now is the router's clock.
func (s *Engine) now() time.Time { return s.h.Now() }

// serveReports runs a report stream read through w (single: a ReportLoad
// stream) until it ends, and returns its status. The stream holds one of
// the guard's slots throughout: from its opening, or for an authenticated
// caller from its first message (admit, admit.go).
func (s *Engine) serveReports(ctx context.Context, w reportWire, single bool) error {
	first, give, err := s.admit(ctx, w, single)
	if err != nil {
		return recvError(err)
	}
	defer give()
	what := "first message"
	if single {
		what = "first report"
	}
	if err := checkAckInterval(first.ackMs, what); err != nil {
		return err
	}
	e := &reportEngine{s: s, wire: w, ctx: ctx, single: single, members: make(map[memberKey]*member), emptySince: time.Now()}
	if c := auth.CallerFrom(ctx); c != nil {
		e.who = c.Name
		if c.Bind != nil {
			e.bound = c.Principal
		}
	}
	e.acks = newAcker(first.ackMs, e.emit)
	defer e.stop()
	e.mu.Lock()
	err = e.apply(first)
	e.mu.Unlock()
	if err != nil {
		return err
	}
	var replaced <-chan struct{}
	if single {
		replaced = e.only.sess.Done()
	}
	ended := make(chan error, 1)
	go e.receive(ended)
	return e.await(ended, replaced)
}

// await waits for the end of the stream, whose receive goroutine reports
// on ended, sending deferred acks when due and reaping a batch stream
// (idle.go). replaced, when not nil, is
// closed when a newer stream replaced the single member.
func (e *reportEngine) await(ended <-chan error, replaced <-chan struct{}) error {
	var reap <-chan time.Time // a batch stream's reaping (idle.go)
	if t := e.idleTicker(); t != nil {
		defer t.Stop()
		reap = t.C
	}
	for {
		select {
		case now := <-reap:
			e.mu.Lock()
			err := e.reap(now)
			e.mu.Unlock()
			if err != nil {
				return err
			}
		case err := <-ended:
			return err
		case <-e.acks.due():
			e.mu.Lock()
			err := e.acks.flush()
			e.mu.Unlock()
			if err != nil {
				return err
			}
		case <-replaced:
			return e.s.replacedError(e.only.id)
		case <-e.s.h.Stopping:
			return status.Error(codes.Unavailable, "router shutting down; reconnect and resend the cache snapshot")
		case <-e.ctx.Done():
			// The client ended the stream (or its deadline passed): Canceled
			// or DeadlineExceeded, logged as the client's doing.
			return status.FromContextError(e.ctx.Err()).Err()
		}
	}
}

// receive applies the stream's messages until it ends, then sends why on
// ended: nil after a clean end (the client's CloseSend; every report
// acked), else the stream's error. It applies nothing once stop ran.
func (e *reportEngine) receive(ended chan<- error) {
	for {
		m, err := e.wire.recv()
		if err != nil {
			if err = recvError(err); err == nil {
				e.mu.Lock()
				err = e.acks.flush() // the last reports are acked before the OK
				e.mu.Unlock()
			}
			ended <- err
			return
		}
		e.mu.Lock()
		if e.closed {
			e.mu.Unlock()
			return
		}
		err = e.apply(m)
		e.mu.Unlock()
		if err != nil {
			ended <- err
			return
		}
	}
}

// singleWire is the engine's view of a ReportLoad stream: a message is one
// report; an ack is one ReportLoadResponse.
type singleWire struct {
	stream loadStream
	one    [1]*pb.ReportLoadRequest
}

func (w *singleWire) recv() (reportMsg, error) {
	m, err := w.stream.Recv()
	if err != nil {
		return reportMsg{}, err
	}
	w.one[0] = m
	return reportMsg{reports: w.one[:], ackMs: m.GetAckIntervalMs()}, nil
}

func (w *singleWire) send(due []*member, _ []*pb.InstanceEnded, iv uint32) error {
	for _, mb := range due {
		if mb.pending {
			return w.stream.Send(&pb.ReportLoadResponse{Seq: mb.ackSeq, ReportIntervalMs: iv})
		}
	}
	return nil
}

// batchWire is the engine's view of a ReportLoadBatch stream.
type batchWire struct{ stream batchStream }

func (w batchWire) recv() (reportMsg, error) {
	m, err := w.stream.Recv()
	if err != nil {
		return reportMsg{}, err
	}
	if n := len(m.GetReports()); n > MaxBatchReports {
		return reportMsg{}, status.Errorf(codes.InvalidArgument,
			"ReportLoadBatch message with %d reports: the limit is %d; send the rest in the next message", n, MaxBatchReports)
	}
	return reportMsg{reports: m.GetReports(), closed: m.GetClosed(), ackMs: m.GetAckIntervalMs()}, nil
}

// send sends one message of its own each time: gRPC may read a sent
// message later.
func (w batchWire) send(due []*member, ended []*pb.InstanceEnded, iv uint32) error {
	out := &pb.ReportLoadBatchResponse{Acks: make([]*pb.InstanceAck, 0, len(due)), Ended: ended}
	for _, mb := range due {
		if mb.pending {
			out.Acks = append(out.Acks, &pb.InstanceAck{Instance: &pb.InstanceRef{Pool: mb.key.pool, InstanceId: mb.key.instance},
				Ack: &pb.ReportLoadResponse{Seq: mb.ackSeq, ReportIntervalMs: iv}})
		}
	}
	if len(out.Acks) == 0 && len(out.Ended) == 0 {
		return nil
	}
	return w.stream.Send(out)
}

// batchRun is the reports of one message that go to one pool together:
// one each of distinct open members, checked and converted (mb.rep).
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

// convert fills rep from m and validates it.
func (s *Engine) convert(m *pb.ReportLoadRequest, rep *state.Report) error {
	if err := protoconv.ReportOf(s.reg, m, rep); err != nil {
		return status.Error(s.h.Code(err), fmt.Sprintf("report seq %d: %v", m.GetSeq(), err))
	}
	return nil
}

// sameIdentity checks that a later report does not rename the stream's
// instance; empty fields mean "unchanged".
func sameIdentity(id state.Identity, m *pb.ReportLoadRequest) error {
	for _, f := range [...]struct{ name, was, got string }{
		{"pool", id.Pool, m.GetPool()}, {"deployment", id.Deployment, m.GetDeployment()},
		{"instance_id", id.Instance, m.GetInstanceId()}, {"address", id.Address, m.GetAddress()},
	} {
		if f.got != "" && f.got != f.was {
			return status.Errorf(codes.InvalidArgument,
				"report seq %d: %s changed on the stream from %q to %q; open a new stream for another identity",
				m.GetSeq(), f.name, f.was, f.got)
		}
	}
	return nil
}

// replacedError is the status of a member whose session ended under it.
func (s *Engine) replacedError(id state.Identity) error {
	return status.Errorf(s.h.Code(state.ErrSessionEnded),
		"instance %q of pool %q: a newer ReportLoad stream replaced this one, or the instance was forgotten",
		id.Instance, id.Pool)
}

// recvError passes a client's clean close as OK and anything else on.
func recvError(err error) error {
	if errors.Is(err, io.EOF) {
		return nil
	}
	return err
}
