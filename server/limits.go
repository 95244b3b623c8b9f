package server

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"golang.org/x/time/rate"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/internal/auth"
)

// TransportLimits bounds what connections and report streams may cost the
// daemon. Zero fields take the defaults stated. SECURITY.md has the whole
// limits table.
type TransportLimits struct {
	// MaxConnections bounds the open gRPC connections; more wait in the
	// listen backlog until one closes. Default 16384.
	MaxConnections int
	// MaxReportStreams bounds the open ReportLoad streams of the daemon;
	// one more ends at once with ResourceExhausted. Default 16384.
	MaxReportStreams int
	// ReportsPerSecond and ReportBurst are the token bucket of every report
	// stream (and of every instance on a ReportLoadBatch stream): a report
	// past it ends the stream with ResourceExhausted naming the limit.
	// Defaults 50 reports/s (the router asks for one every 100 ms), burst
	// 1000. The bucket counts reports as the router reads them, so the
	// burst must hold what queues up while the router is behind: after a
	// stall (CPU starvation, a long GC) a stream's receiver reads its
	// backlog at once, and with a burst of 100 a stall of 10 s at 10
	// reports/s ended the streams of healthy instances; 1000 holds 100 s.
	ReportsPerSecond float64
	ReportBurst      int
	// FirstReportTimeout is how long a new ReportLoad stream may wait
	// before its first report; then it ends with DeadlineExceeded.
	// Default 10s.
	FirstReportTimeout time.Duration
}

// Default transport limits.
const (
	DefaultMaxConnections     = 16384
	DefaultMaxReportStreams   = 16384
	DefaultReportsPerSecond   = 50
	DefaultReportBurst        = 1000
	DefaultFirstReportTimeout = 10 * time.Second
)

// withDefaults returns l with every zero field set to its default.
func (l TransportLimits) withDefaults() TransportLimits {
	if l.MaxConnections <= 0 {
		l.MaxConnections = DefaultMaxConnections
	}
	if l.MaxReportStreams <= 0 {
		l.MaxReportStreams = DefaultMaxReportStreams
	}
	if l.ReportsPerSecond <= 0 {
		l.ReportsPerSecond = DefaultReportsPerSecond
	}
	if l.ReportBurst <= 0 {
		l.ReportBurst = DefaultReportBurst
	}
	if l.FirstReportTimeout <= 0 {
		l.FirstReportTimeout = DefaultFirstReportTimeout
	}
	return l
}

// streamGuard enforces the report-stream limits and the instance bindings
// of the tokens file. Safe for concurrent use.
type streamGuard struct {
	l    TransportLimits
	open atomic.Int64
	hits metric.Int64Counter // prefixroute.limit.hits by limit; nil counts nothing
}

// newStreamGuard returns a guard counting its refusals on meter (nil: not
// counted).
func newStreamGuard(l TransportLimits, meter metric.Meter) (*streamGuard, error) {
	g := &streamGuard{l: l.withDefaults()}
	if meter != nil {
		var err error
		g.hits, err = meter.Int64Counter("prefixroute.limit.hits",
			metric.WithDescription("Calls and streams refused by a limit or a binding, by limit."))
		if err != nil {
			return nil, err
		}
	}
	return g, nil
}

func (g *streamGuard) hit(ctx context.Context, limit string) {
	if g.hits != nil {
		g.hits.Add(ctx, 1, metric.WithAttributes(attribute.String("limit", limit)))
	}
}

// stream is the stream interceptor: ReportLoad streams are counted against
// MaxReportStreams and their messages go through a guardedStream; a
// ReportLoadBatch stream counts once too, gets the first-report deadline,
// and finds the guard in its context (guardFrom) to count its instances
// and their rates itself; other streams pass.
func (g *streamGuard) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	batch := info.FullMethod == pb.LoadService_ReportLoadBatch_FullMethodName
	if !batch && info.FullMethod != pb.LoadService_ReportLoad_FullMethodName {
		return handler(srv, ss)
	}
	ctx := ss.Context()
	if err := g.take(ctx, "report streams"); err != nil {
		return err
	}
	defer g.give()
	gs := &guardedStream{ServerStream: ss, ctx: ctx, g: g, first: true}
	if batch {
		gs.ctx = context.WithValue(ctx, guardKey{}, g)
		return handler(srv, gs)
	}
	gs.lim = g.limiter()
	if c := auth.CallerFrom(ctx); c != nil && c.Bind != nil {
		gs.bound = c.Principal
	}
	return handler(srv, gs)
}

// take holds one of MaxReportStreams for a report stream, or for an
// instance of a ReportLoadBatch stream (what names it in the error); give
// releases it.
func (g *streamGuard) take(ctx context.Context, what string) error {
	if n := g.open.Add(1); n > int64(g.l.MaxReportStreams) {
		g.open.Add(-1)
		g.hit(ctx, "max_report_streams")
		return status.Errorf(codes.ResourceExhausted,
			"too many %s: %d report streams and batched instances open, the limit is %d (--max-report-streams); retry with backoff or use another router replica",
			what, n-1, g.l.MaxReportStreams)
	}
	return nil
}

func (g *streamGuard) give() { g.open.Add(-1) }

// limiter returns a new token bucket of one stream or batched instance.
func (g *streamGuard) limiter() *rate.Limiter {
	return rate.NewLimiter(rate.Limit(g.l.ReportsPerSecond), g.l.ReportBurst)
}

// allow takes a report from lim, or returns the error that ends the stream
// (or the batched instance) over its rate.
func (g *streamGuard) allow(ctx context.Context, lim *rate.Limiter) error {
	if lim.Allow() {
		return nil
	}
	g.hit(ctx, "reports_per_second")
	return status.Errorf(codes.ResourceExhausted,
		"report rate over the limit of %g reports/s (burst %d) per stream (--max-reports-per-second); report at the interval the acks ask for (report_interval_ms)",
		g.l.ReportsPerSecond, g.l.ReportBurst)
}

// guardKey keys the streamGuard in a ReportLoadBatch stream's context.
type guardKey struct{}

// guardFrom returns the guard of a ReportLoadBatch stream's context, or nil
// when no guard runs (the handler then counts nothing).
func guardFrom(ctx context.Context) *streamGuard {
	g, _ := ctx.Value(guardKey{}).(*streamGuard)
	return g
}

// guardedStream is a report stream under its limits. RecvMsg is called
// by one goroutine at a time (the handler's, then its reader's), as gRPC
// requires.
type guardedStream struct {
	grpc.ServerStream
	ctx   context.Context
	g     *streamGuard
	lim   *rate.Limiter // nil: the handler limits the rate (ReportLoadBatch)
	first bool
	bound *auth.Principal // nil: no binding to check here
}

// Context is the stream's context (with the guard, for ReportLoadBatch).
func (s *guardedStream) Context() context.Context { return s.ctx }

// RecvMsg receives one report: the first within FirstReportTimeout, each
// within the stream's token bucket and inside its identity's binding.
func (s *guardedStream) RecvMsg(m any) error {
	var err error
	if s.first {
		s.first = false
		err = s.recvFirst(m)
	} else {
		err = s.ServerStream.RecvMsg(m)
	}
	if err != nil || s.lim == nil {
		return err
	}
	if err := s.g.allow(s.ctx, s.lim); err != nil {
		return err
	}
	if r, ok := m.(*pb.ReportLoadRequest); ok && s.bound != nil {
		if err := s.bound.CheckReport(r); err != nil {
			s.g.hit(s.ctx, "binding")
			return err
		}
	}
	return nil
}

// recvFirst waits for the first report at most FirstReportTimeout. On
// timeout the receive goroutine is left to end with the stream.
func (s *guardedStream) recvFirst(m any) error {
	done := make(chan error, 1)
	go func() { done <- s.ServerStream.RecvMsg(m) }()
	t := time.NewTimer(s.g.l.FirstReportTimeout)
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-t.C:
		s.g.hit(s.Context(), "first_report_timeout")
		return status.Errorf(codes.DeadlineExceeded,
			"no first report within %v of opening the stream (--first-report-timeout); send the identity report right after opening it",
			s.g.l.FirstReportTimeout)
	}
}

// String is the limits in force, for the start-up log line.
func (l TransportLimits) String() string {
	return fmt.Sprintf("connections=%d report_streams=%d reports_per_second=%g burst=%d first_report_timeout=%v",
		l.MaxConnections, l.MaxReportStreams, l.ReportsPerSecond, l.ReportBurst, l.FirstReportTimeout)
}
