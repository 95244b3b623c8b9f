package server

import (
	"errors"
	"fmt"
	"io"

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
// instance and starts its session; every message is applied, then acked.
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

	resendSeen := s.repl.ResendEpoch() // the cluster's resend requests already passed on
	msgs := make(chan *pb.ReportLoadRequest)
	recvErr := make(chan error, 1)
	go func() {
		for {
			m, err := stream.Recv()
			if err != nil {
				recvErr <- err
				return
			}
			select {
			case msgs <- m:
			case <-stream.Context().Done():
				return
			}
		}
	}()
	m, lastSeq := first, first.GetSeq()
	for {
		if m != first {
			if err := sameIdentity(id, m); err != nil {
				return err
			}
			if m.GetSeq() < lastSeq {
				return status.Errorf(codes.InvalidArgument,
					"report seq %d is below the stream's last seq %d: seq must not decrease on a stream; open a new stream to start over",
					m.GetSeq(), lastSeq)
			}
			lastSeq = m.GetSeq()
			if err := ls.convert(m, &rep); err != nil {
				return err
			}
		}
		if err := sess.Report(s.opts.Now(), &rep); err != nil {
			return replacedError(id)
		}
		s.obs.reported(stream.Context(), id.Pool, id.Deployment) // observability hook (metrics.go)
		s.repl.Reported(id, m)
		ack := &pb.ReportLoadResponse{Seq: m.GetSeq(), ReportIntervalMs: uint32(s.opts.ReportInterval.Milliseconds())}
		if e := s.repl.ResendEpoch(); e != resendSeen {
			ack.ResendCache, resendSeen = true, e
		}
		if err := stream.Send(ack); err != nil {
			return err
		}
		select {
		case m = <-msgs:
		case err := <-recvErr:
			return recvError(err)
		case <-sess.Done():
			return replacedError(id)
		case <-s.stopping:
			return status.Error(codes.Unavailable, "router shutting down; reconnect and resend the cache snapshot")
		case <-stream.Context().Done():
			// The client ended the stream (or its deadline passed): Canceled
			// or DeadlineExceeded, logged as the client's doing.
			return status.FromContextError(stream.Context().Err()).Err()
		}
	}
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
