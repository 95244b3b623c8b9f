package client

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
)

// errStreamEnded is a stream's error when the sidecar closed it without one.
var errStreamEnded = errors.New("the sidecar ended the report stream")

// run opens streams until Close, backing off between failures.
func (r *Reporter) run() {
	defer close(r.done)
	failures := 0
	for {
		r.mu.Lock()
		if r.failing {
			r.out.attempts++ // a retry
		}
		r.mu.Unlock()
		acked, err := r.stream()
		if r.isClosing() {
			return
		}
		// A stream that worked resets the backoff, unless a newer stream of
		// the same instance replaced it (Aborted): two processes with one
		// identity must not take turns at full speed.
		if acked && status.Code(err) != codes.Aborted {
			failures = 0
		}
		wait := jitteredBackoff(r.opts.MinBackoff, r.opts.MaxBackoff, failures)
		failures++
		r.mu.Lock()
		r.stats.LastError = err
		first := !r.failing
		r.failing = true
		if first {
			r.out = outage{since: time.Now()}
		}
		r.mu.Unlock()
		// One warning per outage; the retries that follow are debug noise.
		level := slog.LevelDebug
		if first {
			level = slog.LevelWarn
		}
		r.log.Log(context.Background(), level, "prefixroute: load report stream failed; reconnecting",
			"err", err, "code", status.Code(err).String(), "backoff", wait.String())
		ctx, stop := context.WithCancel(context.Background())
		back := r.readyAgain(ctx)
		t := time.NewTimer(wait)
		select {
		case <-r.closing:
		case <-t.C:
		case <-back:
		}
		t.Stop()
		stop()
		if r.isClosing() {
			return
		}
	}
}

func (r *Reporter) isClosing() bool {
	select {
	case <-r.closing:
		return true
	default:
		return false
	}
}

// stream runs one ReportLoad stream: a snapshot first, then a report every
// interval, until the stream fails or Close. acked says whether the sidecar
// acknowledged at least one report.
func (r *Reporter) stream() (acked bool, err error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Close ends the stream cleanly below; this bounds the wait when a send
	// is blocked on a sidecar that stopped reading.
	go func() {
		select {
		case <-r.closing:
			t := time.NewTimer(r.opts.CloseTimeout)
			defer t.Stop()
			select {
			case <-t.C:
				cancel()
			case <-ctx.Done():
			}
		case <-ctx.Done():
		}
	}()
	st, err := r.open(ctx)
	if err != nil {
		return false, err
	}
	r.mu.Lock()
	snap := r.book.begin()
	r.stats.Streams++
	r.mu.Unlock()
	var gotAck atomic.Bool
	recvErr := make(chan error, 1)
	recvDone := make(chan struct{})
	defer func() {
		cancel()
		<-recvDone // no ack counts after the stream's end
		r.mu.Lock()
		r.book.end()
		r.stats.Connected = false
		r.mu.Unlock()
	}()
	if r.opts.CacheEvents && r.opts.Snapshot != nil {
		snap = r.opts.Snapshot()
	}
	go func() {
		defer close(recvDone)
		for {
			ack, err := st.Recv()
			if err != nil {
				recvErr <- err
				return
			}
			gotAck.Store(true)
			r.ack(ack)
		}
	}()
	// ended turns the receiver's error into the stream's.
	ended := func(err error) (bool, error) {
		if errors.Is(err, io.EOF) {
			err = errStreamEnded
		}
		return gotAck.Load(), err
	}
	// sendOrEnd sends one report's messages; on failure it returns the
	// stream's error, which the receiver sees.
	sendOrEnd := func(first bool, b batch) error {
		if err := r.send(st, first, b); err != nil {
			if errors.Is(err, io.EOF) {
				_, err = ended(<-recvErr)
			}
			return err
		}
		return nil
	}

	// A held instance sends not even its first report.
	for r.opts.Hold != nil && r.opts.Hold() {
		t := time.NewTimer(time.Duration(r.interval.Load()))
		select {
		case <-r.closing:
			t.Stop()
			_ = st.CloseSend() // its failure shows as the stream's end, which the caller waits for
			return false, nil
		case err := <-recvErr:
			t.Stop()
			return ended(err)
		case <-t.C:
		}
	}
	if err := sendOrEnd(true, batch{cleared: r.opts.CacheEvents, stored: snap}); err != nil {
		return gotAck.Load(), err
	}
	snap = nil
	last := time.Now()  // of the latest report
	due := r.next(last) // of the timer
	timer := time.NewTimer(time.Until(due))
	defer timer.Stop()
	early := rate.NewLimiter(rate.Every(r.opts.FlushGap), flushBurst)
	for {
		select {
		case <-r.closing:
			_ = st.CloseSend() // its failure shows as the stream's end, which the caller waits for
			select {
			case err := <-recvErr:
				_ = err // the stream's end after CloseSend; Close has nothing to report
			case <-ctx.Done():
			}
			return gotAck.Load(), nil
		case err := <-recvErr:
			return ended(err)
		case <-r.flush:
			// An early report: at once while the flush budget lasts (one
			// per FlushGap, burst flushBurst), else FlushGap after the
			// last report; the sidecar limits reports per second.
			if early.Allow() {
				timer.Reset(0)
				due = time.Now()
			} else if at := last.Add(r.opts.FlushGap); at.Before(due) {
				timer.Reset(time.Until(at))
				due = at
			}
		case <-timer.C:
			due = r.next(time.Now())
			timer.Reset(time.Until(due))
			if r.opts.Hold != nil && r.opts.Hold() {
				continue
			}
			r.mu.Lock()
			var b batch
			if r.resend.Swap(false) && r.opts.CacheEvents {
				// The sidecar asked for the whole cache (a router of an
				// older version whose replica joined: current routers
				// never set resend_cache).
				b = batch{cleared: true, stored: r.book.begin()}
				if r.opts.Snapshot != nil {
					b.stored = r.opts.Snapshot()
				}
				r.stats.Resends++
			} else {
				b = r.book.take()
			}
			r.mu.Unlock()
			last = time.Now()
			if err := sendOrEnd(false, b); err != nil {
				return gotAck.Load(), err
			}
		}
	}
}

// open opens the Reporter's next stream: its own, or its instance on the
// link.
func (r *Reporter) open(ctx context.Context) (reportStream, error) {
	if r.opts.Link != nil {
		return r.opts.Link.open(ctx, r.opts.Pool, r.opts.InstanceID)
	}
	return r.rpc.ReportLoad(ctx)
}

// next is the time of the periodic report after one at now: an interval
// later, or the next time of the link's grid.
func (r *Reporter) next(now time.Time) time.Time {
	every := time.Duration(r.interval.Load())
	if r.opts.Link != nil {
		return r.opts.Link.next(now, every)
	}
	return now.Add(every)
}

// flushBurst is how many early reports Flush may ask for at once: 20,
// which with the periodic reports stays well within the sidecar's default
// burst (1000 reports; it was 100).
const flushBurst = 20

// send sends one report: the instance's load with the batch's events, split
// into as many messages as the event limit needs (each with the same load
// figures). The first report of a stream carries the identity.
func (r *Reporter) send(st reportStream, first bool, b batch) error {
	l := r.opts.Load()
	for i, part := range b.split(r.opts.MaxEventsPerMessage) {
		m := &pb.ReportLoadRequest{
			Seq:                    r.seq.Add(1),
			RunningRequests:        l.RunningRequests,
			WaitingRequests:        l.WaitingRequests,
			QueuedPrefillTokens:    l.QueuedPrefillTokens,
			KvCacheUsage:           l.KVCacheUsage,
			KvCapacityBlocks:       l.KVCapacityBlocks,
			PrefillTokensPerSecond: l.PrefillTokensPerSecond,
			BlockSizeTokens:        l.BlockSizeTokens,
			Draining:               l.Draining,
			Role:                   l.Role,
			ReportsCacheEvents:     r.opts.CacheEvents,
			CacheCleared:           part.cleared,
			StoredBlockHashes:      part.stored,
			RemovedBlockHashes:     part.removed,
		}
		if l.HasQueueMs {
			m.QueueMs = &l.QueueMs
		}
		if first && i == 0 {
			m.Pool, m.Deployment, m.InstanceId, m.Address = r.opts.Pool, r.opts.Deployment, r.opts.InstanceID, r.opts.Address
			if r.opts.AckInterval > 0 {
				m.AckIntervalMs = uint32(r.opts.AckInterval.Milliseconds())
			}
		}
		if err := st.Send(m); err != nil {
			return err
		}
		r.mu.Lock()
		r.stats.Reports++
		r.stats.Events += uint64(part.events())
		r.mu.Unlock()
	}
	return nil
}

// ack applies one acknowledgement: the sidecar's wanted interval.
func (r *Reporter) ack(a *pb.ReportLoadResponse) {
	if ms := a.GetReportIntervalMs(); ms > 0 {
		if d := time.Duration(ms) * time.Millisecond; r.interval.Swap(int64(d)) != int64(d) {
			r.log.Debug("prefixroute: report interval set by the sidecar", "interval", d.String())
		}
	}
	//lint:ignore SA1019 honoured while routers of an older version may ask (ReporterStats.Resends)
	if a.GetResendCache() {
		r.resend.Store(true)
	}
	r.mu.Lock()
	r.stats.Acks++
	r.stats.Connected = true
	recovered := r.failing
	r.failing = false
	var rs ReconnectStats
	if recovered {
		rs = r.reconnected(time.Now())
	}
	r.mu.Unlock()
	if recovered {
		r.logReconnect(rs)
	}
}
