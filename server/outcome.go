package server

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"unicode/utf8"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/internal/pickbook"
	"github.com/prefixroute/prefixroute/internal/state"
)

// The limits of ReportOutcome (docs/api.md): outcomes per call, request_id
// length and ttft_ms. pool and instance_id are bounded by the registry's
// MaxNameBytes, as everywhere else.
const (
	MaxOutcomesPerCall = 1024
	MaxRequestIDBytes  = 256
	MaxTTFTMs          = 3_600_000
)

// outcomeScratch is the reusable memory of one ReportOutcome call.
type outcomeScratch struct {
	outs  []state.Outcome
	entry PickOutcome // the matched pick (outcome_calib.go)
	deps  []string    // the deployments of a run's matched picks
}

var outcomeScratches = sync.Pool{New: func() any { return &outcomeScratch{outs: make([]state.Outcome, 0, 64)} }}

// ReportOutcome implements PickService.ReportOutcome: OutcomesFor.
func (ps *pickService) ReportOutcome(ctx context.Context, req *pb.ReportOutcomeRequest) (*pb.ReportOutcomeResponse, error) {
	return ps.s.OutcomesFor(ctx, req)
}

// OutcomesFor is the one entry point of gateways' outcomes, for every
// front end (gRPC ReportOutcome, HTTP POST /v1/outcome, the ext_proc
// server's own): it validates every outcome first (a bad one refuses the
// whole call with InvalidArgument naming it, and nothing is applied), then
// applies them in runs of the same pool, one pool lock per run at most: a
// connect_failed makes the instance unreachable, a served ends that
// (state.Pool.ApplyOutcomes); counts them per pool and status
// (prefixroute_outcomes) with their ttft (prefixroute_outcome_ttft); and
// keeps each with its pick, matched by request_id (PickOutcome), whose
// served ttft feeds its deployment's prefill fit and the prediction and
// target metrics (learn). An
// unknown pool, instance or request_id is counted in the response, not an
// error. The error is a gRPC status. Safe for concurrent use.
func (s *Server) OutcomesFor(ctx context.Context, req *pb.ReportOutcomeRequest) (*pb.ReportOutcomeResponse, error) {
	outs := req.GetOutcomes()
	if err := s.checkOutcomes(outs); err != nil {
		return nil, statusOf(err)
	}
	now := s.opts.Now()
	resp := &pb.ReportOutcomeResponse{Accepted: uint32(len(outs))}
	sc := outcomeScratches.Get().(*outcomeScratch)
	for start := 0; start < len(outs); {
		name := outs[start].GetPool()
		end := start + 1
		for end < len(outs) && outs[end].GetPool() == name {
			end++
		}
		run := outs[start:end]
		start = end
		pool, err := s.reg.Pool(name)
		if err != nil {
			resp.UnknownInstances += uint32(len(run))
			s.outcomes.count(ctx, "", run)
			continue
		}
		sc.outs, sc.deps = sc.outs[:0], sc.deps[:0]
		all := true // every outcome matched its pick: its deployment is known
		for _, o := range run {
			sc.outs = append(sc.outs, state.Outcome{Instance: o.GetInstanceId(), Kind: outcomeKind(o.GetStatus())})
			if s.book.Match(name, o.GetRequestId(), o.GetInstanceId(), o.GetStatus(), o.TtftMs, &sc.entry) {
				resp.Matched++
				s.learn(ctx, pool, &sc.entry)
				if !slices.Contains(sc.deps, sc.entry.Deployment) {
					sc.deps = append(sc.deps, sc.entry.Deployment)
				}
			} else {
				all = false
			}
		}
		res := pool.ApplyOutcomes(now, sc.outs)
		s.repl.Outcomes(name, sc.outs, res)
		resp.UnknownInstances += uint32(res.Unknown)
		s.outcomes.count(ctx, name, run)
		// A finished request may have freed capacity: in the deployments
		// of the picks matched, or anywhere when one was not.
		if all {
			for _, dep := range sc.deps {
				s.flow.KickKey(name, dep)
			}
		} else {
			s.flow.Kick(name)
		}
	}
	clear(sc.outs)
	sc.outs = sc.outs[:0]
	outcomeScratches.Put(sc)
	return resp, nil
}

// outcomeKind is what a status means to the state.
func outcomeKind(st pb.OutcomeStatus) state.OutcomeKind {
	switch st {
	case pb.OutcomeStatus_OUTCOME_STATUS_SERVED:
		return state.OutcomeServed
	case pb.OutcomeStatus_OUTCOME_STATUS_CONNECT_FAILED:
		return state.OutcomeConnectFailed
	}
	return state.OutcomeOther
}

// checkOutcomes validates a call's outcomes against the limits; the error
// wraps state.ErrInvalidOutcome and names the first bad field.
func (s *Server) checkOutcomes(outs []*pb.Outcome) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", state.ErrInvalidOutcome, fmt.Sprintf(format, args...))
	}
	if len(outs) == 0 {
		return bad("outcomes is empty; send 1 to %d", MaxOutcomesPerCall)
	}
	if len(outs) > MaxOutcomesPerCall {
		return bad("outcomes has %d entries; the limit is %d a call", len(outs), MaxOutcomesPerCall)
	}
	maxName := s.reg.Limits().MaxNameBytes
	for i, o := range outs {
		switch {
		case o.GetPool() == "":
			return bad("outcomes[%d].pool is empty; name the pool the request was picked from", i)
		case len(o.GetPool()) > maxName:
			return bad("outcomes[%d].pool is %d bytes; the limit is %d", i, len(o.GetPool()), maxName)
		case o.GetInstanceId() == "":
			return bad("outcomes[%d].instance_id is empty; name the instance that was tried", i)
		case len(o.GetInstanceId()) > maxName:
			return bad("outcomes[%d].instance_id is %d bytes; the limit is %d", i, len(o.GetInstanceId()), maxName)
		case len(o.GetRequestId()) > MaxRequestIDBytes:
			return bad("outcomes[%d].request_id is %d bytes; the limit is %d", i, len(o.GetRequestId()), MaxRequestIDBytes)
		case o.GetStatus() == pb.OutcomeStatus_OUTCOME_STATUS_UNSPECIFIED:
			return bad("outcomes[%d].status is unspecified; want served, connect_failed, upstream_error, timeout or cancelled", i)
		case pb.OutcomeStatus_name[int32(o.GetStatus())] == "":
			return bad("outcomes[%d].status is %d, not an OutcomeStatus; want 1 (served) to 5 (cancelled)", i, int32(o.GetStatus()))
		case o.TtftMs != nil && !(*o.TtftMs >= 0 && *o.TtftMs <= MaxTTFTMs):
			return bad("outcomes[%d].ttft_ms is %v; want a finite number of ms in [0, %d]", i, *o.TtftMs, MaxTTFTMs)
		case !utf8.ValidString(o.GetRequestId()):
			return bad("outcomes[%d].request_id is not valid UTF-8", i)
		}
	}
	return nil
}

// bookPick keeps a successful pick with its request_id in the pick book
// (outcome_book.go); ids over MaxRequestIDBytes are not kept (no outcome
// could name them).
func (s *Server) bookPick(pool, requestID string, pk *state.Pick, promptTokens uint32) {
	if requestID == "" || len(requestID) > MaxRequestIDBytes {
		return
	}
	d := &pk.Decision
	if d.Instance < 0 || d.Instance >= len(d.Instances) {
		return
	}
	r := &d.Instances[d.Instance]
	e := PickOutcome{Pool: pool, RequestID: requestID, Instance: pk.Snapshot.Instances[d.Instance].ID,
		Deployment: pk.Snapshot.Deployments[d.Deployment].Name, At: s.opts.Now(),
		CostMs: r.CostMs, PrefillMs: r.PrefillMs, QueueMs: r.QueueMs}
	bookFeatures(&e, pk, promptTokens)
	if math.IsNaN(e.CostMs) {
		e.CostMs = 0
	}
	s.book.Add(&e)
}

// PickOutcome is one recent pick and the outcome a gateway reported for it
// (internal/pickbook).
type PickOutcome = pickbook.Entry

// PickOutcome returns the recent pick made with requestID and the outcome
// a gateway reported for it, if the book still holds it (the last
// pickbook.Size picks with a request_id, about). Safe for concurrent use.
func (s *Server) PickOutcome(requestID string) (PickOutcome, bool) {
	return s.book.Get(requestID)
}
