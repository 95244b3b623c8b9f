package server

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/internal/auth"
	"github.com/prefixroute/prefixroute/internal/flowq"
	"github.com/prefixroute/prefixroute/internal/protoconv"
	"github.com/prefixroute/prefixroute/internal/state"
	"github.com/prefixroute/prefixroute/scheduler"
)

// flowHold is what a pick under on_saturation: queue leaves for its audit:
// its band and flow (after the caller's flow binding) and how long it
// waited.
type flowHold struct {
	queued bool
	band   int32
	flow   string
	waited float64 // ms
}

// holdPick decides req on a pool whose policy is on_saturation: queue: the
// pick waits in the pool's queue (internal/flowq) while the pool is
// saturated, or while the deployment it draws is full (parked under that
// deployment's name until it reports or finishes a request). Every retry
// makes the same draws (the pick's seed), so a pick keeps its deployment
// while the shares stay the same. The error is the scheduler's, or a status for a pick that
// left the queue without an instance.
func (s *Server) holdPick(ctx context.Context, pool *state.Pool, pol *scheduler.Policy, req *pb.PickRequest, sc *pickScratch, seed uint64, h *flowHold) error {
	h.band, h.flow = auth.BindFlow(ctx, req.GetPriority(), req.GetFlowId())
	if h.flow == "" {
		h.flow = flowq.DefaultFlow
	}
	var err error
	try := func() (bool, string) {
		sc.pcg.Seed(seed, seedStream) // the same draws on every retry
		err = pool.Pick(s.opts.Now(), &sc.in, sc.rng, &sc.pick)
		if d := &sc.pick.Decision; errors.Is(err, scheduler.ErrDeploymentSaturated) && d.HeldDeployment >= 0 {
			return true, sc.pick.Snapshot.Deployments[d.HeldDeployment].Name
		}
		return errors.Is(err, scheduler.ErrSaturated), ""
	}
	l := flowq.Limits{MaxWaiting: int(pol.QueueMaxWaiting), MaxPerBand: int(pol.QueueMaxPerBand)}
	it := flowq.Item{Flow: h.flow, Priority: h.band, Tokens: uint64(req.GetPromptTokens())}
	waited, herr := s.flow.Hold(ctx, pool.Name(), l, pol.QueueTTL, it, try)
	h.waited, h.queued = float64(waited.Nanoseconds())/1e6, waited > 0 || herr != nil
	if herr != nil {
		return flowStatus(pool.Name(), h, herr)
	}
	return err
}

// flowStatus is the status of a pick that left the queue without an
// instance: RESOURCE_EXHAUSTED (HTTP 429) with an ErrorInfo reason
// QUEUE_TIMEOUT, QUEUE_FULL or SHEDDABLE_REJECTED, or CANCELLED.
func flowStatus(pool string, h *flowHold, err error) error {
	reason := flowq.Reason(err)
	msg := fmt.Sprintf("pool %q is saturated (on_saturation: queue): %v (priority %d, flow %q, waited %.1f ms)", pool, err, h.band, h.flow, h.waited)
	if reason == "canceled" {
		return status.Error(codes.Canceled, msg)
	}
	return protoconv.WithReason(codes.ResourceExhausted, msg, flowReasons[reason], pool).Err()
}

// flowReasons are the ErrorInfo reasons of flowq's errors.
var flowReasons = map[string]string{
	"queue_timeout":      "QUEUE_TIMEOUT",
	"queue_full":         "QUEUE_FULL",
	"sheddable_rejected": "SHEDDABLE_REJECTED",
}

// audit adds the hold to a response's decision.
func (h *flowHold) audit(resp *pb.PickResponse) {
	if d := resp.GetDecision(); d != nil && h.queued {
		d.QueueWaitMs, d.QueueBand, d.FlowId = h.waited, h.band, h.flow
	}
}

// FlowQueues reports every pool's waiting room (the console's queue view).
// Safe for concurrent use.
func (s *Server) FlowQueues() []flowq.PoolQueue { return s.flow.Snapshot(nil) }

// FlowQueue is pool's waiting room with at most perBand flows per band, and
// whether a pick of pool has waited since the router started (the console's
// capacity view). Safe for concurrent use.
func (s *Server) FlowQueue(pool string, perBand int) (flowq.PoolQueue, bool) {
	return s.flow.Detail(pool, perBand)
}

// kickingReplicas is the report engine's view of the replicas: the
// cluster's, plus a kick of the pool's waiting picks on every report
// applied from a stream (capacity may have freed).
type kickingReplicas struct {
	Replicator
	s *Server
}

// Reported passes the report on and kicks its pool's queue: the picks
// parked for the instance's deployment, and the next pick.
func (k kickingReplicas) Reported(id state.Identity, m *pb.ReportLoadRequest) {
	k.Replicator.Reported(id, m)
	k.s.flow.KickKey(id.Pool, id.Deployment)
}
