package server

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/frontend"
	"github.com/prefixroute/prefixroute/internal/decisionlog"
	"github.com/prefixroute/prefixroute/internal/state"
)

// pickRecord is everything one Pick leaves for its observers: the request,
// the decision when the scheduler ran, the seed, and the answer. PickFor
// fills it and hands it over once (Server.recorded), which feeds the
// metrics, the span and the decision log and logs a failed pick. It lives on
// PickFor's stack; pk points into the call's scratch, valid until recorded
// returns.
type pickRecord struct {
	meta    frontend.PickMeta
	req     *pb.PickRequest
	pool    string      // the pool's name once the registry knew it; else ""
	pk      *state.Pick // the scheduler's snapshot and decision; nil if it did not run
	decErr  error       // the scheduler's error, when pk is set
	seed    uint64      // the seed of the draws, when pk is set
	resp    *pb.PickResponse
	err     error // the status the caller gets
	elapsed time.Duration
	// logged: the decision log samples this pick, decided before the pick
	// so that the scheduler computes the full audit the log records.
	logged bool
}

// PickFor is the one Pick entry point of every front end: the gRPC
// PickService calls it, and so does any other front end that turns its
// request into a pb.PickRequest (an Envoy ext_proc endpoint, an HTTP
// route endpoint). It decides as Pick does and records the call once in
// the metrics (prefixroute_picks_total, prefixroute_pick_duration_seconds,
// ...), on the span in ctx and in the decision log, and logs it when it
// fails, exactly as for a gRPC Pick. The error is a gRPC status whatever
// the front end (map it with status.Code). Safe for concurrent use.
func (s *Server) PickFor(ctx context.Context, req *pb.PickRequest, meta frontend.PickMeta) (*pb.PickResponse, error) {
	if meta.Start.IsZero() {
		meta.Start = time.Now()
	}
	rec := pickRecord{meta: meta, req: req, logged: s.obs.logs()}
	sc := s.picks.Get().(*pickScratch)
	defer func() {
		if p := recover(); p != nil {
			// Counted as a failed pick; the recovery interceptor (or the
			// front end's own) logs the panic and answers Internal.
			rec.pk, rec.resp = nil, nil
			rec.err = status.Error(codes.Internal, "internal error: panic while picking")
			s.recorded(ctx, &rec)
			panic(p)
		}
		s.recorded(ctx, &rec)
		sc.in = state.PickInput{}
		s.picks.Put(sc)
	}()
	rec.resp, rec.err = s.pick(ctx, req, sc, &rec)
	return rec.resp, rec.err
}

// recorded hands a finished pick to its observers: the observer's metrics,
// span and decision log (a nil observer records nothing), then the log line
// of a failed pick.
func (s *Server) recorded(ctx context.Context, rec *pickRecord) {
	rec.elapsed = time.Since(rec.meta.Start)
	s.obs.done(ctx, rec)
	if rec.err != nil {
		s.logFailedPick(ctx, rec)
	}
}

// logFailedPick logs a Pick that failed, at the level frontend.CodeLevel gives its
// code, with the fields the gRPC logging interceptor gives other calls.
// Successful picks are counted in metrics and sampled by the decision log
// instead: the logging interceptor would cost ~70 allocations a pick even
// below the log level.
func (s *Server) logFailedPick(ctx context.Context, rec *pickRecord) {
	code := status.Code(rec.err)
	lvl := frontend.CodeLevel(code)
	if !s.log.Enabled(ctx, lvl) {
		return
	}
	service, method := rec.meta.Service, rec.meta.Method
	if service == "" {
		service, method = pb.PickService_ServiceDesc.ServiceName, "Pick"
	}
	args := []any{"component", "grpc", "grpc.service", service, "grpc.method", method, "grpc.code", code.String(),
		"grpc.error", rec.err.Error(), "grpc.time_ms", float64(rec.elapsed.Microseconds()) / 1000,
		"pool", rec.req.GetPool(), "request_id", rec.req.GetRequestId()}
	if sc := rec.traceContext(ctx); sc.IsValid() {
		args = append(args, "trace_id", sc.TraceID().String())
	}
	s.log.Log(ctx, lvl, "finished call", args...)
}

// traceContext is the pick's trace: the span context in ctx, else the
// front end's frontend.PickMeta.Trace.
func (rec *pickRecord) traceContext(ctx context.Context) trace.SpanContext {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		return sc
	}
	return rec.meta.Trace
}

// audited reports whether the record holds a decision whose figures are
// worth recording: a successful one, or one that failed for lack of an
// eligible instance, for saturation or for lack of weight (the decision says
// why).
func (rec *pickRecord) audited() bool {
	return rec.pk != nil && (rec.decErr == nil || decisionExplains(rec.decErr))
}

// blocks is the number of prefix blocks the request carried.
func (rec *pickRecord) blocks() int { return len(rec.req.GetPrefixHashes()) }

// logDecision hands a sampled pick to the decision log: the response the
// client got, or the decision rendered with its full audit when the client
// asked for less (PickRequest.audit).
func (o *observer) logDecision(ctx context.Context, rec *pickRecord) {
	if rec.req == nil {
		return
	}
	resp := rec.resp
	if a := rec.req.GetAudit(); resp != nil && a != pb.AuditLevel_AUDIT_LEVEL_UNSPECIFIED && a != pb.AuditLevel_AUDIT_LEVEL_FULL {
		resp = pickResponse(rec.pk, rec.seed, rec.blocks(), rec.req.GetPromptTokens())
	}
	o.dlog.Add(ctx, decisionlog.Record{Start: rec.meta.Start, Elapsed: rec.elapsed, Trace: rec.traceContext(ctx),
		Req: rec.req, Resp: resp, Err: rec.err})
}

// RecordServed writes to the decision log, when there is one, that the
// gateway served the request of pool with id requestID on served, not on
// chosen, the endpoint its pick returned (a retry or a fallback): a line
// of kind "served_mismatch" (docs/operating.md, "Decision log"). Every such report is
// written, unsampled. The caller counts it in its own metric. Safe for
// concurrent use.
func (s *Server) RecordServed(ctx context.Context, pool, requestID, chosen, served string) {
	if s.obs == nil || s.obs.dlog == nil {
		return
	}
	line := decisionlog.Served{Time: s.obs.now().UTC(), Kind: "served_mismatch", Pool: pool, RequestID: requestID, Chosen: chosen, Served: served}
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		line.TraceID = sc.TraceID().String()
	}
	s.obs.dlog.AddServed(ctx, line)
}
