package report

import (
	"context"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"golang.org/x/time/rate"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Limits bounds the report streams of an Engine. A zero field turns
// its limit off; the daemon fills every field from its TransportLimits
// (defaults applied).
type Limits struct {
	// MaxStreams bounds the open report streams plus the instances open on
	// ReportLoadBatch streams (--max-report-streams).
	MaxStreams int
	// PerSecond and Burst are the token bucket of each ReportLoad stream
	// and of each instance on a ReportLoadBatch stream
	// (--max-reports-per-second, --report-burst; a burst below 1 is 1).
	PerSecond float64
	Burst     int
	// FirstReportTimeout is how long a new stream may wait before its
	// first message, and a ReportLoadBatch stream may carry no open
	// instance (--first-report-timeout; idle.go).
	FirstReportTimeout time.Duration
}

// Limit puts l in force on the engine's report streams (both RPCs)
// and counts their refusals on meter as prefixroute.limit.hits by limit
// (nil: not counted); the instance bindings of the tokens file are checked
// whatever l says. Call it before the first stream; without it no limit
// applies.
func (s *Engine) Limit(l Limits, meter metric.Meter) error {
	g := &streamGuard{l: l}
	if meter != nil {
		var err error
		g.hits, err = meter.Int64Counter("prefixroute.limit.hits",
			metric.WithDescription("Calls and streams refused by a limit or a binding, by limit."))
		if err != nil {
			return err
		}
	}
	s.guard = g
	return nil
}

// streamGuard enforces Limits; the report engine (stream.go)
// calls it per stream and per instance. A nil *streamGuard limits nothing.
// Safe for concurrent use.
type streamGuard struct {
	l    Limits
	open atomic.Int64        // report streams and batched instances open
	hits metric.Int64Counter // nil counts nothing
}

// hit counts a refusal by limit.
func (g *streamGuard) hit(ctx context.Context, limit string) {
	if g != nil && g.hits != nil {
		g.hits.Add(ctx, 1, metric.WithAttributes(attribute.String("limit", limit)))
	}
}

// take holds one of MaxStreams for a report stream, or for an instance of
// a ReportLoadBatch stream (what names it in the error); give releases it.
func (g *streamGuard) take(ctx context.Context, what string) error {
	if g == nil {
		return nil
	}
	if n := g.open.Add(1); g.l.MaxStreams > 0 && n > int64(g.l.MaxStreams) {
		g.open.Add(-1)
		g.hit(ctx, "max_report_streams")
		return status.Errorf(codes.ResourceExhausted,
			"too many %s: %d report streams and batched instances open, the limit is %d (--max-report-streams); retry with backoff or use another router replica",
			what, n-1, g.l.MaxStreams)
	}
	return nil
}

func (g *streamGuard) give() {
	if g != nil {
		g.open.Add(-1)
	}
}

// limiter returns a new token bucket of one instance, or nil when no rate
// is enforced.
func (g *streamGuard) limiter() *rate.Limiter {
	if g == nil || g.l.PerSecond <= 0 {
		return nil
	}
	return rate.NewLimiter(rate.Limit(g.l.PerSecond), max(g.l.Burst, 1))
}

// allow takes a report from lim (nil: always), or returns the error that
// ends the instance over its rate.
func (g *streamGuard) allow(ctx context.Context, lim *rate.Limiter) error {
	if lim == nil || lim.Allow() {
		return nil
	}
	g.hit(ctx, "reports_per_second")
	return status.Errorf(codes.ResourceExhausted,
		"report rate over the limit of %g reports/s (burst %d) per stream (--max-reports-per-second); report at the interval the acks ask for (report_interval_ms)",
		g.l.PerSecond, g.l.Burst)
}

// recvFirst receives a stream's first message, within FirstReportTimeout
// when one is set. On timeout the receiving goroutine is left to end with
// the stream.
func (g *streamGuard) recvFirst(ctx context.Context, w reportWire) (reportMsg, error) {
	if g == nil || g.l.FirstReportTimeout <= 0 {
		return w.recv()
	}
	type got struct {
		m   reportMsg
		err error
	}
	done := make(chan got, 1)
	go func() {
		m, err := w.recv()
		done <- got{m, err}
	}()
	t := time.NewTimer(g.l.FirstReportTimeout)
	defer t.Stop()
	select {
	case r := <-done:
		return r.m, r.err
	case <-t.C:
		g.hit(ctx, "first_report_timeout")
		return reportMsg{}, status.Errorf(codes.DeadlineExceeded,
			"no first report within %v of opening the stream (--first-report-timeout); send the identity report right after opening it",
			g.l.FirstReportTimeout)
	}
}

// OpenStreams is how many --max-report-streams slots are held now:
// open report streams plus instances open on ReportLoadBatch streams; 0
// before Limit. Safe for concurrent use.
func (s *Engine) OpenStreams() int64 {
	if s.guard == nil {
		return 0
	}
	return s.guard.open.Load()
}
