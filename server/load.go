package server

import (
	"context"
	"errors"
	"fmt"
	"io"

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

type loadService struct {
	pb.UnsafeLoadServiceServer
	s *Server
}

type (
	reportStream = grpc.BidiStreamingServer[pb.ReportLoadRequest, pb.ReportLoadResponse]
	batchStream  = grpc.BidiStreamingServer[pb.ReportLoadBatchRequest, pb.ReportLoadBatchResponse]
)

// ReportLoad implements LoadService.ReportLoad: the first message names the
// instance and starts its session; every message is applied, then acked
// (at once, or by a later cumulative ack when the stream set
// ack_interval_ms: acker, load_ack.go). It is a report stream of one
// member (load_engine.go) whose errors end the stream.
func (ls *loadService) ReportLoad(stream reportStream) error {
	return ls.s.serveReports(stream.Context(), &singleWire{stream: stream}, true)
}

// ReportLoadBatch implements LoadService.ReportLoadBatch: the ReportLoad
// streams of several instances on one stream; an instance's error ends
// that instance alone (InstanceEnded). The stream ends OK after the
// client's CloseSend, once every report is acked.
func (ls *loadService) ReportLoadBatch(stream batchStream) error {
	return ls.s.serveReports(stream.Context(), batchWire{stream}, false)
}

// serveReports runs a report stream read through w (single: a ReportLoad
// stream) until it ends, and returns its status. The stream holds one of
// the guard's slots throughout: from its opening, or for an authenticated
// caller from its first message (admit, load_admit.go).
func (s *Server) serveReports(ctx context.Context, w reportWire, single bool) error {
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
	e := &reportEngine{s: s, wire: w, ctx: ctx, single: single, members: make(map[memberKey]*member)}
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
// on ended, sending deferred acks when due. replaced, when not nil, is
// closed when a newer stream replaced the single member.
func (e *reportEngine) await(ended <-chan error, replaced <-chan struct{}) error {
	for {
		select {
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
			return replacedError(e.only.id)
		case <-e.s.stopping:
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
	stream reportStream
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
func (s *Server) convert(m *pb.ReportLoadRequest, rep *state.Report) error {
	if err := protoconv.ReportOf(s.reg, m, rep); err != nil {
		return status.Error(codeOf(err), fmt.Sprintf("report seq %d: %v", m.GetSeq(), err))
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

func replacedError(id state.Identity) error {
	return status.Errorf(codeOf(state.ErrSessionEnded),
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
