package report

import (
	"context"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/prefixroute/prefixroute/internal/auth"
)

// MaxFirstReportWaits is how many report streams (of either RPC) one
// identity of the tokens file may hold open before their first message.
// Such a stream takes a slot of --max-report-streams only once its first
// message arrives and its reports pass the identity's binding, so an
// identity, bound or not, that opens streams and sends nothing cannot use
// up the slots of the whole daemon; this cap bounds the streams it may
// keep waiting (each for up to --first-report-timeout).
const MaxFirstReportWaits = 64

// waiting counts, per identity, the report streams waiting for their first
// message. Safe for concurrent use.
type waiting struct {
	mu sync.Mutex
	n  map[string]int
}

// enter holds one of name's MaxFirstReportWaits, or refuses the stream.
func (w *waiting) enter(name string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.n == nil {
		w.n = make(map[string]int)
	}
	if w.n[name] >= MaxFirstReportWaits {
		return status.Errorf(codes.ResourceExhausted,
			"identity %q holds %d report streams that have sent no first report yet, the limit is %d: send the identity report right after opening a stream",
			name, w.n[name], MaxFirstReportWaits)
	}
	w.n[name]++
	return nil
}

// leave releases what enter held.
func (w *waiting) leave(name string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.n[name]--; w.n[name] <= 0 {
		delete(w.n, name)
	}
}

// admit is a report stream's entry: it receives the first message and
// returns it with the release of the stream's slot of MaxStreams. Without
// an authenticated caller (no tokens file) the slot is taken when the
// stream opens, as it always was; an authenticated caller's stream waits
// on its identity's MaxFirstReportWaits instead, and takes the slot once
// its first message is in and inside the caller's binding (firstCovered).
func (s *Engine) admit(ctx context.Context, w reportWire, single bool) (reportMsg, func(), error) {
	g := s.guard
	c := auth.CallerFrom(ctx)
	if c == nil || g == nil {
		if err := g.take(ctx, "report streams"); err != nil {
			return reportMsg{}, nil, err
		}
		first, err := g.recvFirst(ctx, w)
		if err != nil {
			g.give()
			return reportMsg{}, nil, err
		}
		return first, g.give, nil
	}
	if err := s.waits.enter(c.Name); err != nil {
		g.hit(ctx, "first_report_waits")
		return reportMsg{}, nil, err
	}
	first, err := g.recvFirst(ctx, w)
	s.waits.leave(c.Name)
	if err != nil {
		return reportMsg{}, nil, err
	}
	if err := firstCovered(c.Principal, first, single); err != nil {
		g.hit(ctx, "binding")
		return reportMsg{}, nil, err
	}
	if err := g.take(ctx, "report streams"); err != nil {
		return reportMsg{}, nil, err
	}
	return first, g.give, nil
}

// firstCovered refuses a bound identity's stream whose first message
// reports nothing inside its binding: the first report of a ReportLoad
// stream, at least one report of a ReportLoadBatch stream's first message.
// Nil for a principal without a binding.
func firstCovered(p *auth.Principal, first reportMsg, single bool) error {
	if p.Bind == nil {
		return nil
	}
	if len(first.reports) == 0 {
		return status.Errorf(codes.PermissionDenied,
			"identity %q is bound to %s; the first message of its report stream carries no report", p.Name, p.Bind)
	}
	var err error
	for _, r := range first.reports {
		if err = p.CheckReport(r); err == nil || single {
			return err
		}
	}
	return err
}
