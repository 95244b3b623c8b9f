// Package decisionlog holds the decision log: sampled Picks written as JSON
// lines (Line), one per pick, with the request summary and the full
// response, plus the served-endpoint lines (Served) a gateway reports, and
// the latest lines of each pool for the console's Explain page (Recent).
// Add and AddServed only hand a record to a bounded buffer; one goroutine
// marshals and writes, so the caller never waits for the disk, and a full
// buffer drops and counts. A *Log is safe for concurrent use; Close loses
// nothing that was accepted.
package decisionlog

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

// DefaultBuffer is how many sampled picks the decision log holds
// waiting for the disk before it drops (and counts) new ones.
const DefaultBuffer = 4096

// Log writes sampled Picks as JSON lines, one per pick: the request
// summary and the full response with its Decision, for offline analysis and
// replay. Add only hands a record to a bounded channel; one goroutine
// marshals and writes, so Pick never waits for the disk. When the channel
// is full the record is dropped and counted. Safe for concurrent use.
type Log struct {
	rate    float64
	ch      chan record
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

// Record is one sampled pick, marshalled by the writer. The caller no
// longer modifies the request and response once it handed them to Add.
type Record struct {
	Start   time.Time         // when the pick started
	Elapsed time.Duration     // how long it took
	Trace   trace.SpanContext // the pick's span, if any
	Req     *pb.PickRequest   // nil: nothing is logged
	// Resp is the response with its full audit, whatever audit level the
	// request asked for; nil when the pick failed without a decision.
	Resp *pb.PickResponse
	Err  error // the pick's gRPC status error, nil when it succeeded
}

// record is what the writer's channel carries: a pick or a served line.
type record struct {
	Record
	served *Served // set: a served-endpoint line, not a pick
}

// Served is the decision log's line for a request the gateway served on
// another endpoint than the one chosen (a retry or a fallback), keyed by
// the request id of its pick's line. Kind tells it from a pick's line,
// which has none.
type Served struct {
	Time      time.Time `json:"time"`
	Kind      string    `json:"kind"` // "served_mismatch"
	TraceID   string    `json:"trace_id,omitempty"`
	Pool      string    `json:"pool"`
	RequestID string    `json:"request_id,omitempty"`
	Chosen    string    `json:"chosen"`
	Served    string    `json:"served"`
}

// Line is the JSON line of a pick. Request is the PickRequest without its
// prefix hashes, which PrefixBlocks counts and FirstHash / LastHash
// summarise (with chained hashes the last one names the whole prefix).
// Response is the PickResponse with the full audit, whatever audit level the
// request asked for (Request.audit says what the client got).
type Line struct {
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

// Open appends to path. rate is the fraction of picks sampled, in
// [0, 1]; buffer the records held waiting for the disk.
func Open(path string, rate float64, buffer int, m metric.Meter) (*Log, error) {
	if !(rate >= 0 && rate <= 1) {
		return nil, fmt.Errorf("decision log rate %v: want a fraction in [0, 1] (--decision-log-rate)", rate)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("decision log (--decision-log): %w", err)
	}
	l, err := New(f, rate, buffer, m)
	if err != nil {
		_ = f.Close() // nothing was written yet; the meter's error is the one to return
		return nil, err
	}
	return l, nil
}

// New starts the writer on w, which Close closes; see Open.
func New(w io.WriteCloser, rate float64, buffer int, m metric.Meter) (*Log, error) {
	if buffer <= 0 {
		buffer = DefaultBuffer
	}
	l := &Log{rate: rate, ch: make(chan record, buffer), quit: make(chan struct{}), done: make(chan error, 1), w: w}
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

// Sample reports whether this pick is to be logged: call it before building
// the Record. Safe for concurrent use.
func (l *Log) Sample() bool {
	return l.rate >= 1 || (l.rate > 0 && rand.Float64() < l.rate)
}

// Add hands one sampled pick to the writer without blocking. A record
// that finds the buffer full, or comes after Close, is dropped and counted.
// A Record without a request is ignored.
func (l *Log) Add(ctx context.Context, r Record) {
	if r.Req == nil {
		return
	}
	l.send(ctx, record{Record: r})
}

// send hands r to the writer without blocking, or drops and counts it when
// the buffer is full or the log closed. The read lock orders send with
// Close: once Close holds the lock, no send is between its check and its
// channel send, so the writer's final drain sees every record accepted.
func (l *Log) send(ctx context.Context, r record) {
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

// AddServed hands the writer a served-endpoint line, unsampled: every
// mismatch is a sign that the router's view is wrong. Dropped and counted
// like a pick's record when the buffer is full or after Close.
func (l *Log) AddServed(ctx context.Context, line Served) {
	l.send(ctx, record{served: &line})
}

// run writes records until Close, flushing whenever the buffer runs empty.
func (l *Log) run() {
	bw := bufio.NewWriterSize(l.w, 64<<10)
	var werr error
	write := func(r *record) {
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
				l.recent.add(r.Req.GetPool(), line)
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
func (l *Log) Close(ctx context.Context) error {
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

// Recent returns pool's latest lines, newest first (the log keeps the
// last 64 of all pools together). Safe for concurrent use.
func (l *Log) Recent(pool string) []json.RawMessage { return l.recent.of(pool) }

// lineJSON renders the messages with their .proto field names (snake_case,
// like the line's own keys).
var lineJSON = protojson.MarshalOptions{UseProtoNames: true}

// marshal renders the record as one JSON line.
func (r *record) marshal() ([]byte, error) {
	if r.served != nil {
		return json.Marshal(r.served)
	}
	q := r.Req
	summary := proto.Clone(q).(*pb.PickRequest)
	summary.PrefixHashes = nil
	line := Line{Time: r.Start.UTC(), DurationSeconds: r.Elapsed.Seconds(), Code: status.Code(r.Err).String(),
		PrefixBlocks: len(q.GetPrefixHashes())}
	if h := q.GetPrefixHashes(); len(h) > 0 {
		line.FirstHash, line.LastHash = strconv.FormatUint(h[0], 10), strconv.FormatUint(h[len(h)-1], 10)
	}
	if r.Trace.IsValid() {
		line.TraceID = r.Trace.TraceID().String()
	}
	if r.Err != nil {
		line.Error = status.Convert(r.Err).Message()
	}
	var err error
	if line.Request, err = lineJSON.Marshal(summary); err != nil {
		return nil, err
	}
	if r.Resp != nil {
		if line.Response, err = lineJSON.Marshal(r.Resp); err != nil {
			return nil, err
		}
	}
	return json.Marshal(&line)
}
