package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
)

// Outcome is what happened to one try of a picked request, for
// Picker.ReportOutcome and OutcomeReporter.
type Outcome struct {
	// RequestID is the Request.RequestID the pick was made with: the
	// sidecar keeps the outcome with that pick. Optional.
	RequestID string
	// InstanceID is the instance tried (Result.InstanceID, or a fallback's).
	// Required.
	InstanceID string
	// Status is what happened: pb.OutcomeStatus_OUTCOME_STATUS_SERVED,
	// _CONNECT_FAILED (the sidecar then leaves the instance out of picks
	// for a 5 s back-off), _UPSTREAM_ERROR, _TIMEOUT or _CANCELLED.
	Status pb.OutcomeStatus
	// TTFT is the time from sending the request to the first byte of the
	// response body; 0 when unknown (not sent).
	TTFT time.Duration
}

// message is o as the sidecar's Outcome of pool.
func (o *Outcome) message(pool string) *pb.Outcome {
	m := &pb.Outcome{Pool: pool, RequestId: o.RequestID, InstanceId: o.InstanceID, Status: o.Status}
	if o.TTFT > 0 {
		ms := float64(o.TTFT) / float64(time.Millisecond)
		m.TtftMs = &ms
	}
	return m
}

// ReportOutcome sends outcomes of the Picker's pool to the sidecar in one
// call (at most 1024), within PickerOptions.Timeout. The error is the
// call's gRPC status error (InvalidArgument naming a bad outcome).
func (p *Picker) ReportOutcome(ctx context.Context, outcomes ...Outcome) (*pb.ReportOutcomeResponse, error) {
	req := &pb.ReportOutcomeRequest{Outcomes: make([]*pb.Outcome, len(outcomes))}
	for i := range outcomes {
		req.Outcomes[i] = outcomes[i].message(p.opts.Pool)
	}
	if p.opts.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, p.opts.Timeout)
		defer cancel()
	}
	return p.rpc.ReportOutcome(ctx, req, p.opts.CallOptions...)
}

// OutcomeReporterOptions configures an OutcomeReporter. Zero fields take
// the defaults stated.
type OutcomeReporterOptions struct {
	// FlushInterval is the longest an outcome waits to be sent. Default
	// 100ms. A connect_failed is sent at once, so that the next pick
	// already avoids the instance.
	FlushInterval time.Duration
	// MaxBatch is the most outcomes one call carries. Default and maximum
	// 1024 (the sidecar's limit).
	MaxBatch int
	// Buffer bounds the outcomes waiting to be sent; past it Report drops
	// them (OutcomeReporterStats.Dropped). Default 8192.
	Buffer int
	// OnError, when set, is called from the reporter's goroutine with each
	// failed call's error (its outcomes are dropped and counted).
	OnError func(error)
}

// OutcomeReporterStats are an OutcomeReporter's counts since it started.
type OutcomeReporterStats struct {
	Sent, Dropped, Failed uint64
}

// OutcomeReporter batches outcomes of a Picker's pool and sends them in
// the background: Report never blocks on the network. Safe for concurrent
// use; Close sends what is left and stops it.
type OutcomeReporter struct {
	p                     *Picker
	opts                  OutcomeReporterOptions
	mu                    sync.Mutex
	pending               []Outcome
	kick, stop            chan struct{}
	done                  chan struct{}
	sent, dropped, failed atomic.Uint64
	closed                bool
	closeErr              error // the final flush's errors, for Close
}

// NewOutcomeReporter starts an OutcomeReporter sending through p.
func (p *Picker) NewOutcomeReporter(opts OutcomeReporterOptions) (*OutcomeReporter, error) {
	if opts.MaxBatch < 0 || opts.MaxBatch > 1024 {
		return nil, fmt.Errorf("client: OutcomeReporterOptions.MaxBatch is %d; want 0 (default 1024) to 1024", opts.MaxBatch)
	}
	if opts.FlushInterval < 0 || opts.Buffer < 0 {
		return nil, errors.New("client: OutcomeReporterOptions: FlushInterval and Buffer must not be negative")
	}
	if opts.FlushInterval == 0 {
		opts.FlushInterval = 100 * time.Millisecond
	}
	if opts.MaxBatch == 0 {
		opts.MaxBatch = 1024
	}
	if opts.Buffer == 0 {
		opts.Buffer = 8192
	}
	r := &OutcomeReporter{p: p, opts: opts, kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go r.run()
	return r, nil
}

// Report queues one outcome; a connect_failed is sent at once. It drops
// the outcome (counted) when the buffer is full or the reporter closed.
func (r *OutcomeReporter) Report(o Outcome) {
	r.mu.Lock()
	if r.closed || len(r.pending) >= r.opts.Buffer {
		r.mu.Unlock()
		r.dropped.Add(1)
		return
	}
	r.pending = append(r.pending, o)
	urgent := o.Status == pb.OutcomeStatus_OUTCOME_STATUS_CONNECT_FAILED || len(r.pending) >= r.opts.MaxBatch
	r.mu.Unlock()
	if urgent {
		select {
		case r.kick <- struct{}{}:
		default:
		}
	}
}

// Stats returns the counts so far.
func (r *OutcomeReporter) Stats() OutcomeReporterStats {
	return OutcomeReporterStats{Sent: r.sent.Load(), Dropped: r.dropped.Load(), Failed: r.failed.Load()}
}

// Close sends the outcomes queued, within the Picker's timeout per call,
// and stops the reporter; the error is that of the calls of this last
// flush that failed (their outcomes are counted in Failed). Later Reports
// are dropped. A second Close does nothing and returns nil.
func (r *OutcomeReporter) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	r.mu.Unlock()
	close(r.stop)
	<-r.done
	return r.closeErr
}

func (r *OutcomeReporter) run() {
	defer close(r.done)
	t := time.NewTicker(r.opts.FlushInterval)
	defer t.Stop()
	var batch []Outcome
	for {
		select {
		case <-r.stop:
			var errs []error
			for batch = r.take(batch); len(batch) > 0; batch = r.take(batch) {
				if err := r.send(batch); err != nil {
					errs = append(errs, err)
				}
			}
			r.closeErr = errors.Join(errs...)
			return
		case <-t.C:
		case <-r.kick:
		}
		for batch = r.take(batch); len(batch) > 0; batch = r.take(batch) {
			_ = r.send(batch) // counted in Failed and given to OnError
		}
	}
}

// take moves up to MaxBatch pending outcomes into batch (reused).
func (r *OutcomeReporter) take(batch []Outcome) []Outcome {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := min(len(r.pending), r.opts.MaxBatch)
	batch = append(batch[:0], r.pending[:n]...)
	r.pending = append(r.pending[:0], r.pending[n:]...)
	return batch
}

// send makes one call of batch, counting its outcomes as sent or failed.
func (r *OutcomeReporter) send(batch []Outcome) error {
	if _, err := r.p.ReportOutcome(context.Background(), batch...); err != nil {
		r.failed.Add(uint64(len(batch)))
		if r.opts.OnError != nil {
			r.opts.OnError(err)
		}
		return err
	}
	r.sent.Add(uint64(len(batch)))
	return nil
}
