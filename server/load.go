package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/internal/protoconv"
	"github.com/prefixroute/prefixroute/internal/state"
)

type loadService struct {
	pb.UnsafeLoadServiceServer
	s *Server
}

type reportStream = grpc.BidiStreamingServer[pb.ReportLoadRequest, pb.ReportLoadResponse]

// ReportLoad implements LoadService.ReportLoad: the first message names the
// instance and starts its session; every message is applied, then acked
// (at once, or by a later cumulative ack when the stream set
// ack_interval_ms: acker, load_ack.go).
func (ls *loadService) ReportLoad(stream reportStream) error {
	s := ls.s
	first, err := stream.Recv()
	if err != nil {
		return recvError(err)
	}
	id := state.Identity{Pool: first.GetPool(), Deployment: first.GetDeployment(),
		Instance: first.GetInstanceId(), Address: first.GetAddress()}
	if err := s.reg.ValidateIdentity(id); err != nil {
		return status.Error(codeOf(err), "first report of a stream: "+err.Error())
	}
	var rep state.Report
	if err := ls.convert(first, &rep); err != nil {
		return err
	}
	if err := checkAckInterval(first.GetAckIntervalMs(), "first report"); err != nil {
		return err
	}
	pool, err := s.reg.Ensure(id.Pool)
	if err != nil {
		return statusOf(err)
	}
	// Before Connect: from here on, other replicas' events for this
	// instance no longer drive it, so none can replace the new session.
	s.repl.StreamOpened(id.Pool, id.Instance)
	sess, err := pool.Connect(s.opts.Now(), id)
	if err != nil {
		s.repl.StreamEnded(id.Pool, id.Instance, false)
		return statusOf(err)
	}
	if prev, ok := sess.TookOver(); ok {
		s.tookOver(stream.Context(), id, prev)
	}
	defer func() { sess.Close(s.opts.Now()) }()
	defer s.repl.StreamEnded(id.Pool, id.Instance, true)
	s.log.Debug("report stream opened", "pool", id.Pool, "deployment", id.Deployment, "instance", id.Instance, "address", id.Address)

	l := &reportLoop{ls: ls, stream: stream, id: id, sess: sess, rep: &rep, lastSeq: first.GetSeq(),
		counts: s.obs.reporting(id.Pool, id.Deployment)}
	l.acks = newAcker(s, first.GetAckIntervalMs(), func(resend bool) error {
		return stream.Send(&pb.ReportLoadResponse{Seq: l.ackSeq, ReportIntervalMs: s.reportIntervalMs(), ResendCache: resend})
	})
	defer l.stop() // first of the defers: no report is applied after StreamEnded
	l.mu.Lock()
	err = l.apply(first)
	l.mu.Unlock()
	if err != nil {
		return err
	}
	ended := make(chan error, 1)
	go l.receive(ended)
	return s.awaitEnd(stream.Context(), ended, l.acks, &l.mu, sess.Done(), func() error { return replacedError(id) })
}

// awaitEnd waits for the end of a report stream whose receive goroutine
// reports on ended, sending the deferred acks of acks (under mu) when due:
// it returns the stream's status. replaced, when not nil, is closed when a
// newer stream replaced the stream's instance; replacedErr is then the
// status.
func (s *Server) awaitEnd(ctx context.Context, ended <-chan error, acks *acker, mu *sync.Mutex,
	replaced <-chan struct{}, replacedErr func() error) error {
	for {
		select {
		case err := <-ended:
			return err
		case <-acks.due():
			mu.Lock()
			err := acks.flush()
			mu.Unlock()
			if err != nil {
				return err
			}
		case <-replaced:
			return replacedErr()
		case <-s.stopping:
			return status.Error(codes.Unavailable, "router shutting down; reconnect and resend the cache snapshot")
		case <-ctx.Done():
			// The client ended the stream (or its deadline passed): Canceled
			// or DeadlineExceeded, logged as the client's doing.
			return status.FromContextError(ctx.Err()).Err()
		}
	}
}

// reportLoop is one ReportLoad stream after its first report. Its receive
// goroutine reads, applies and acks each report; the handler's goroutine
// waits for the stream's end and sends deferred acks. mu serialises
// applying and Send between the two, and stop ends both.
type reportLoop struct {
	ls      *loadService
	stream  reportStream
	id      state.Identity
	sess    *state.Session
	counts  *depObs
	acks    *acker
	mu      sync.Mutex // held while applying a report or sending an ack
	closed  bool       // set by stop: nothing is applied or sent after it
	rep     *state.Report
	lastSeq uint64 // of the latest report checked
	ackSeq  uint64 // of the latest report applied
}

// receive applies the stream's reports until it ends (receiveReports).
func (l *reportLoop) receive(ended chan<- error) {
	receiveReports(l.stream.Recv, l.check, l.apply, &l.mu, &l.closed, l.acks, ended)
}

// receiveReports is the receive goroutine of a report stream: it receives
// each message, checks it (check, without mu) and applies it (apply, under
// mu, unless the stream's loop stopped: closed) until the stream ends, then
// sends why on ended: nil after a clean end (the client's CloseSend; every
// report acked), else the stream's error.
func receiveReports[M any](recv func() (M, error), check, apply func(M) error, mu *sync.Mutex, closed *bool,
	acks *acker, ended chan<- error) {
	for {
		m, err := recv()
		if err != nil {
			if err = recvError(err); err == nil {
				mu.Lock()
				err = acks.flush() // the last reports are acked before the OK
				mu.Unlock()
			}
			ended <- err
			return
		}
		if check != nil {
			if err := check(m); err != nil {
				ended <- err
				return
			}
		}
		mu.Lock()
		if *closed {
			mu.Unlock()
			return
		}
		err = apply(m)
		mu.Unlock()
		if err != nil {
			ended <- err
			return
		}
	}
}

// check validates a later report of the stream and converts it into l.rep
// (which only apply, under mu after it, reads).
func (l *reportLoop) check(m *pb.ReportLoadRequest) error {
	if err := sameIdentity(l.id, m); err != nil {
		return err
	}
	if m.GetSeq() < l.lastSeq {
		return status.Errorf(codes.InvalidArgument,
			"report seq %d is below the stream's last seq %d: seq must not decrease on a stream; open a new stream to start over",
			m.GetSeq(), l.lastSeq)
	}
	l.lastSeq = m.GetSeq()
	return l.ls.convert(m, l.rep)
}

// apply applies the converted report m to the session, passes it to the
// replicas and acks it. The caller holds mu.
func (l *reportLoop) apply(m *pb.ReportLoadRequest) error {
	s := l.ls.s
	if err := l.sess.Report(s.opts.Now(), l.rep); err != nil {
		return replacedError(l.id)
	}
	l.counts.reported() // observability hook (metrics.go)
	s.repl.Reported(l.id, m)
	l.ackSeq = m.GetSeq()
	return l.acks.applied(false)
}

// stop ends the loop: the reports applied so far are acked when the
// stream can still carry it, and the receive goroutine applies and sends
// nothing more (it ends when Recv fails after the handler returns).
func (l *reportLoop) stop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	l.acks.close()
}

// convert fills rep from m and validates it.
func (ls *loadService) convert(m *pb.ReportLoadRequest, rep *state.Report) error {
	if err := protoconv.ReportOf(ls.s.reg, m, rep); err != nil {
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
