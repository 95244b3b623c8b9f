package report

import (
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// MaxAckIntervalMs is the largest ack_interval_ms a ReportLoad stream may
// ask for: 60000 (one ack a minute). A larger value ends the stream with
// InvalidArgument before its instance is connected.
const MaxAckIntervalMs = 60000

// checkAckInterval validates ack_interval_ms of a stream's first message
// (what names the message in the error).
func checkAckInterval(ms uint32, what string) error {
	if ms > MaxAckIntervalMs {
		return status.Errorf(codes.InvalidArgument,
			"%s of a stream: ack_interval_ms %d is above the limit %d (one ack a minute); use 0 to ack every report",
			what, ms, MaxAckIntervalMs)
	}
	return nil
}

// acker paces a report stream's acks: one per report, or, when the stream
// asked for an ack interval, at most one per interval covering every report
// applied before it. What an ack holds is the stream's: emit sends it (the
// engine's emit, stream.go). Pacing is in real time (it is the transport's,
// not the pool's clock). Not safe for concurrent use, except due: the
// stream's loop calls the rest under its mutex, as it sends.
type acker struct {
	emit  func() error  // sends the pending ack
	every time.Duration // 0: ack every report

	sent     bool        // an ack went out on this stream
	lastSent time.Time   // when the latest ack went out
	pending  bool        // a report applied and not yet acked
	timer    *time.Timer // armed while an ack is deferred; nil when every is 0
	armed    bool
}

// newAcker returns the acker of a stream that asked for everyMs
// (ack_interval_ms, already checked) and whose acks emit sends.
func newAcker(everyMs uint32, emit func() error) *acker {
	a := &acker{emit: emit, every: time.Duration(everyMs) * time.Millisecond}
	if a.every > 0 {
		a.timer = time.NewTimer(a.every)
		a.timer.Stop() // armed by the first deferred ack
	}
	return a
}

// reportIntervalMs is the report_interval_ms of every ack.
func (s *Engine) reportIntervalMs() uint32 { return uint32(s.h.ReportInterval.Milliseconds()) }

// applied notes a report applied and acks it now, or leaves it to a later
// ack when the stream's interval allows. now asks for the ack at once (an
// instance's first report on a batch stream).
func (a *acker) applied(now bool) error {
	a.pending = true
	if now || a.every == 0 || !a.sent {
		return a.flush()
	}
	if wait := a.every - time.Since(a.lastSent); wait > 0 {
		a.arm(wait)
		return nil
	}
	return a.flush()
}

// due is the channel that fires when a deferred ack must go out (nil when
// every report is acked at once); the caller then calls flush. Safe to call
// concurrently with the other methods.
func (a *acker) due() <-chan time.Time {
	if a.timer == nil {
		return nil
	}
	return a.timer.C
}

// flush sends the pending ack, if any.
func (a *acker) flush() error {
	if a.armed {
		a.timer.Stop()
		a.armed = false
	}
	if !a.pending {
		return nil
	}
	a.pending, a.sent, a.lastSent = false, true, time.Now()
	return a.emit()
}

// arm starts the timer for a deferred ack unless it runs already.
func (a *acker) arm(wait time.Duration) {
	if !a.armed {
		a.timer.Reset(wait)
		a.armed = true
	}
}

// close acks what is pending, when the stream can still carry it (an error
// that ends the stream comes after the acks of the reports before it), and
// releases the timer.
func (a *acker) close() {
	_ = a.flush() // the stream's own end says what went wrong
	if a.timer != nil {
		a.timer.Stop()
	}
}
