package report

import (
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// A ReportLoadBatch stream holds its slot of --max-report-streams for as
// long as it carries instances. Every quarter of FirstReportTimeout
// (--first-report-timeout) it ends the instances whose sessions ended under
// it (taken over by another stream, or forgotten) with Aborted, at once
// rather than at their next report, which frees their slots; a stream that
// has then had no open instance for FirstReportTimeout (all ended, closed,
// taken over or refused) ends with FailedPrecondition, which frees its own.
// Without a FirstReportTimeout (no limits) nothing is reaped.

// idleTicker returns the ticker of a batch stream's reaping, or nil when
// the stream is not reaped (ReportLoad, or no FirstReportTimeout).
func (e *reportEngine) idleTicker() *time.Ticker {
	g := e.s.guard
	if e.single || g == nil || g.l.FirstReportTimeout <= 0 {
		return nil
	}
	return time.NewTicker(max(g.l.FirstReportTimeout/4, time.Millisecond))
}

// reap ends the members whose sessions ended under them, sends their ends,
// and returns the error that ends the stream once it has had no member
// for FirstReportTimeout at now. The caller holds mu.
func (e *reportEngine) reap(now time.Time) error {
	for k, mb := range e.members {
		select {
		case <-mb.sess.Done():
			e.end(k, mb, e.s.replacedError(mb.id))
		default:
		}
	}
	if len(e.due) > 0 || len(e.ended) > 0 {
		if err := e.acks.applied(true); err != nil {
			return err
		}
	}
	limit := e.s.guard.l.FirstReportTimeout
	if len(e.members) > 0 || now.Sub(e.emptySince) < limit {
		return nil
	}
	e.s.guard.hit(e.ctx, "empty_batch_stream")
	return status.Errorf(codes.FailedPrecondition,
		"this ReportLoadBatch stream has had no open instance for %v (--first-report-timeout): its instances ended, closed, "+
			"were refused or were taken over by another stream; open a new stream to report again", limit)
}
