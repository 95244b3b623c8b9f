package server

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
)

// DefaultDecisionLogBuffer is how many sampled picks the decision log holds
// waiting for the disk before it drops (and counts) new ones.
const DefaultDecisionLogBuffer = 4096

// decisionLog writes sampled Picks as JSON lines, one per pick: the request
// summary and the full response with its Decision, for offline analysis and
// replay. Pick only hands a record to a bounded channel; one goroutine
// marshals and writes, so Pick never waits for the disk. When the channel
// is full the record is dropped and counted. Safe for concurrent use.
type decisionLog struct {
	rate    float64
	ch      chan decisionRecord
	quit    chan struct{}
	done    chan error
	mu      sync.RWMutex // add holds it for reading; Close sets closed under it
	closed  bool
	once    sync.Once
	w       io.WriteCloser
	written metric.Int64Counter
	dropped metric.Int64Counter
	recent  recentLines // the last lines written, for the console's Explain page
}

// decisionRecord is one sampled pick, marshalled by the writer. The request
// and response are not touched by gRPC once the handler returned.
type decisionRecord struct {
	start   time.Time
	elapsed time.Duration
	trace   trace.SpanContext
	req     *pb.PickRequest
	resp    *pb.PickResponse
	err     error
	served  *servedLine // set: a served-endpoint line, not a pick
}

// servedLine is the decision log's line for a request the gateway served on
// another endpoint than the one chosen (a retry or a fallback), keyed by
// the request id of its pick's line. Kind tells it from a pick's line,
// which has none.
type servedLine struct {
	Time      time.Time `json:"time"`
	Kind      string    `json:"kind"` // "served_mismatch"
	TraceID   string    `json:"trace_id,omitempty"`
	Pool      string    `json:"pool"`
	RequestID string    `json:"request_id,omitempty"`
	Chosen    string    `json:"chosen"`
	Served    string    `json:"served"`
}

// DecisionLine is the JSON line. Request is the PickRequest without its
// prefix hashes, which PrefixBlocks counts and FirstHash / LastHash
// summarise (with chained hashes the last one names the whole prefix).
// Response is the PickResponse with the full audit, whatever audit level the
// request asked for (Request.audit says what the client got).
type DecisionLine struct {
	Time            time.Time       `json:"time"`
	DurationSeconds float64         `json:"duration_seconds"`
	TraceID         string          `json:"trace_id,omitempty"`
	Code            string          `json:"code"`
	Error           string          `json:"error,omitempty"`
	PrefixBlocks    int             `json:"prefix_blocks"`
	FirstHash       string          `json:"first_hash,omitempty"`
	LastHash        string          `json:"last_hash,omitempty"`
	Request         json.RawMessage `json:"request"`
	Response        json.RawMessage `json:"response,omitempty"`
}

// openDecisionLog appends to path. rate is the fraction of picks sampled, in
// [0, 1]; buffer the records held waiting for the disk.
func openDecisionLog(path string, rate float64, buffer int, m metric.Meter) (*decisionLog, error) {
	if !(rate >= 0 && rate <= 1) {
		return nil, fmt.Errorf("decision log rate %v: want a fraction in [0, 1] (--decision-log-rate)", rate)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("decision log (--decision-log): %w", err)
	}
	l, err := newDecisionLog(f, rate, buffer, m)
	if err != nil {
		_ = f.Close() // nothing was written yet; the meter's error is the one to return
		return nil, err
	}
	return l, nil
}

// newDecisionLog starts the writer on w, which Close closes.
func newDecisionLog(w io.WriteCloser, rate float64, buffer int, m metric.Meter) (*decisionLog, error) {
	if buffer <= 0 {
		buffer = DefaultDecisionLogBuffer
	}
	l := &decisionLog{rate: rate, ch: make(chan decisionRecord, buffer), quit: make(chan struct{}), done: make(chan error, 1), w: w}
	var err error
	l.written, err = m.Int64Counter("prefixroute_decision_log_records", metric.WithUnit("{record}"),
		metric.WithDescription("Sampled picks written to the decision log."))
	if err == nil {
		l.dropped, err = m.Int64Counter("prefixroute_decision_log_dropped", metric.WithUnit("{record}"),
			metric.WithDescription("Sampled picks dropped because the decision log's buffer was full (the disk is too slow)."))
	}
	if err != nil {
		return nil, err
	}
	l.written.Add(context.Background(), 0) // both series exist from the start
	l.dropped.Add(context.Background(), 0)
	go l.run()
	return l, nil
}

// sample reports whether this pick is to be logged.
func (l *decisionLog) sample() bool {
	return l.rate >= 1 || (l.rate > 0 && rand.Float64() < l.rate)
}

// add hands one pick to the writer without blocking: the response the
// client got, or the decision rendered with its full audit when the client
// asked for less (PickRequest.audit). A record that finds the buffer full,
// or comes after Close, is dropped and counted (send).
func (l *decisionLog) add(ctx context.Context, rec *pickRecord) {
	if rec.req == nil {
		return
	}
	resp := rec.resp
	if a := rec.req.GetAudit(); resp != nil && a != pb.AuditLevel_AUDIT_LEVEL_UNSPECIFIED && a != pb.AuditLevel_AUDIT_LEVEL_FULL {
		resp = pickResponse(rec.pk, rec.seed, rec.blocks(), rec.req.GetPromptTokens())
	}
	l.send(ctx, decisionRecord{start: rec.meta.Start, elapsed: rec.elapsed, trace: rec.traceContext(ctx), req: rec.req, resp: resp, err: rec.err})
}

// send hands r to the writer without blocking, or drops and counts it when
// the buffer is full or the log closed. The read lock orders send with
// Close: once Close holds the lock, no send is between its check and its
// channel send, so the writer's final drain sees every record accepted.
func (l *decisionLog) send(ctx context.Context, r decisionRecord) {
	l.mu.RLock()
	if !l.closed {
		select {
		case l.ch <- r:
			l.mu.RUnlock()
			return
		default:
		}
	}
	l.mu.RUnlock()
	l.dropped.Add(ctx, 1)
}

// addServed hands the writer a served-endpoint line, unsampled: every
// mismatch is a sign that the router's view is wrong. Dropped and counted
// like a pick's record when the buffer is full or after Close.
func (l *decisionLog) addServed(ctx context.Context, line servedLine) {
	l.send(ctx, decisionRecord{served: &line})
}

// run writes records until Close, flushing whenever the buffer runs empty.
func (l *decisionLog) run() {
	bw := bufio.NewWriterSize(l.w, 64<<10)
	var werr error
	write := func(r *decisionRecord) {
		line, err := r.marshal()
		if err == nil {
			_, err = bw.Write(append(line, '\n'))
		}
		if err != nil && werr == nil {
			werr = err
		}
		if err == nil {
			l.written.Add(context.Background(), 1)
			if r.served == nil { // the console's Explain lists picks
				l.recent.add(r.req.GetPool(), line)
			}
		}
	}
	for {
		select {
		case r := <-l.ch:
			write(&r)
			if len(l.ch) == 0 {
				// bufio keeps a write error: Close returns the first one.
				if err := bw.Flush(); err != nil && werr == nil {
					werr = err
				}
			}
		case <-l.quit:
			for len(l.ch) > 0 {
				r := <-l.ch
				write(&r)
			}
			if err := bw.Flush(); err != nil && werr == nil {
				werr = err
			}
			if err := l.w.Close(); err != nil && werr == nil {
				werr = err
			}
			l.done <- werr
			return
		}
	}
}

// Close writes what is buffered, closes the file and returns the first write
// error. Picks logged afterwards are dropped. Bounded by ctx.
func (l *decisionLog) Close(ctx context.Context) error {
	l.once.Do(func() {
		l.mu.Lock()
		l.closed = true
		l.mu.Unlock()
		close(l.quit)
	})
	select {
	case err := <-l.done:
		if err != nil {
			return fmt.Errorf("decision log: %w", err)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("decision log: not flushed: %w", ctx.Err())
	}
}

// lineJSON renders the messages with their .proto field names (snake_case,
// like the line's own keys).
var lineJSON = protojson.MarshalOptions{UseProtoNames: true}

// marshal renders the record as one JSON line.
func (r *decisionRecord) marshal() ([]byte, error) {
	if r.served != nil {
		return json.Marshal(r.served)
	}
	q := r.req
	summary := proto.Clone(q).(*pb.PickRequest)
	summary.PrefixHashes = nil
	line := DecisionLine{Time: r.start.UTC(), DurationSeconds: r.elapsed.Seconds(), Code: status.Code(r.err).String(),
		PrefixBlocks: len(q.GetPrefixHashes())}
	if h := q.GetPrefixHashes(); len(h) > 0 {
		line.FirstHash, line.LastHash = strconv.FormatUint(h[0], 10), strconv.FormatUint(h[len(h)-1], 10)
	}
	if r.trace.IsValid() {
		line.TraceID = r.trace.TraceID().String()
	}
	if r.err != nil {
		line.Error = status.Convert(r.err).Message()
	}
	var err error
	if line.Request, err = lineJSON.Marshal(summary); err != nil {
		return nil, err
	}
	if r.resp != nil {
		if line.Response, err = lineJSON.Marshal(r.resp); err != nil {
			return nil, err
		}
	}
	return json.Marshal(&line)
}
