package server

import (
	"errors"
	"fmt"
	"io"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/internal/state"
)

type loadService struct {
	pb.UnimplementedLoadServiceServer
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
	if s.repl != nil {
		// Before Connect: from here on, other replicas' events for this
		// instance no longer drive it, so none can replace the new session.
		s.repl.streamOpened(id.Pool, id.Instance)
	}
	sess, err := pool.Connect(s.opts.Now(), id)
	if err != nil {
		if s.repl != nil {
			s.repl.streamEnded(id.Pool, id.Instance, false)
		}
		return statusOf(err)
	}
	defer func() { sess.Close(s.opts.Now()) }()
	if s.repl != nil {
		defer s.repl.streamEnded(id.Pool, id.Instance, true)
	}
	s.log.Debug("report stream opened", "pool", id.Pool, "deployment", id.Deployment, "instance", id.Instance, "address", id.Address)

	var resendSeen uint64 // the cluster's resend requests already passed on
	if s.repl != nil {
		resendSeen = s.repl.resendEpoch.Load()
	}
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
	m := first
	for {
		if m != first {
			if err := sameIdentity(id, m); err != nil {
				return err
			}
			if err := ls.convert(m, &rep); err != nil {
				return err
			}
		}
		if err := sess.Report(s.opts.Now(), &rep); err != nil {
			return replacedError(id)
		}
		s.obs.reported(stream.Context(), id.Pool, id.Deployment) // observability hook (metrics.go)
		if s.repl != nil {
			s.repl.reported(id, m)
		}
		ack := &pb.ReportLoadResponse{Seq: m.GetSeq(), ReportIntervalMs: uint32(s.opts.ReportInterval.Milliseconds())}
		if s.repl != nil {
			if e := s.repl.resendEpoch.Load(); e != resendSeen {
				ack.ResendCache, resendSeen = true, e
			}
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
	if err := reportOf(ls.s.reg, m, rep); err != nil {
		return status.Error(codeOf(err), fmt.Sprintf("report seq %d: %v", m.GetSeq(), err))
	}
	return nil
}

// reportOf fills rep from m and validates it against reg's limits.
func reportOf(reg *state.Registry, m *pb.ReportLoadRequest, rep *state.Report) error {
	*rep = state.Report{
		Seq: m.GetSeq(), RunningRequests: m.GetRunningRequests(), WaitingRequests: m.GetWaitingRequests(),
		QueuedPrefillTokens: m.GetQueuedPrefillTokens(), QueueMs: m.GetQueueMs(), HasQueueMs: m.QueueMs != nil,
		KVCacheUsage: m.GetKvCacheUsage(), KVCapacityBlocks: m.GetKvCapacityBlocks(),
		PrefillTokensPerSecond: m.GetPrefillTokensPerSecond(), BlockSizeTokens: m.GetBlockSizeTokens(),
		Draining: m.GetDraining(), ReportsCacheEvents: m.GetReportsCacheEvents(), CacheCleared: m.GetCacheCleared(),
		Stored: m.GetStoredBlockHashes(), Removed: m.GetRemovedBlockHashes(),
	}
	return reg.ValidateReport(rep)
}

// reportProto is the inverse of reportOf, for snapshots: id and rep as one
// report message.
func reportProto(id state.Identity, rep *state.Report) *pb.ReportLoadRequest {
	m := &pb.ReportLoadRequest{
		Pool: id.Pool, Deployment: id.Deployment, InstanceId: id.Instance, Address: id.Address,
		Seq: rep.Seq, RunningRequests: rep.RunningRequests, WaitingRequests: rep.WaitingRequests,
		QueuedPrefillTokens: rep.QueuedPrefillTokens, KvCacheUsage: rep.KVCacheUsage, KvCapacityBlocks: rep.KVCapacityBlocks,
		PrefillTokensPerSecond: rep.PrefillTokensPerSecond, BlockSizeTokens: rep.BlockSizeTokens, Draining: rep.Draining,
		ReportsCacheEvents: rep.ReportsCacheEvents, CacheCleared: rep.CacheCleared,
		StoredBlockHashes: rep.Stored, RemovedBlockHashes: rep.Removed,
	}
	if rep.HasQueueMs {
		m.QueueMs = &rep.QueueMs
	}
	return m
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
