package client

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"google.golang.org/grpc/connectivity"
)

// jitteredBackoff is the wait before the next attempt after n consecutive
// failures. The first retry (n = 0, the stream had worked: a sidecar
// restart, most often) comes soon, uniform in [minD/2, 3·minD/2] (100 ms ±
// 50 ms by default); later ones back off with full jitter, uniform in
// [0, min(maxD, minD·2^n)].
func jitteredBackoff(minD, maxD time.Duration, n int) time.Duration {
	if n == 0 {
		return min(maxD, minD/2+rand.N(minD+1))
	}
	ceil := maxD
	if n < 62 && minD<<n > 0 && minD<<n < maxD {
		ceil = minD << n
	}
	return rand.N(ceil + 1)
}

// connWatcher is the part of a *grpc.ClientConn the Reporter watches to
// retry as soon as the connection is back.
type connWatcher interface {
	GetState() connectivity.State
	WaitForStateChange(ctx context.Context, from connectivity.State) bool
	Connect()
}

// readyAgain returns a channel closed when the Reporter's connection next
// becomes ready after not being ready (a restarted sidecar is reached
// again), so that a backoff wait ends at once; a connection that stays
// ready (the sidecar itself ended or refused the stream) never closes it,
// and the backoff applies in full. nil when the connection is not a
// *grpc.ClientConn. An idle connection is told to connect (it would wait
// for a call). It stops watching when ctx ends.
func (r *Reporter) readyAgain(ctx context.Context) <-chan struct{} {
	cw := r.watch
	if cw == nil {
		return nil
	}
	ch := make(chan struct{})
	go func() {
		s := cw.GetState()
		for {
			if s == connectivity.Idle {
				cw.Connect()
			}
			if !cw.WaitForStateChange(ctx, s) {
				return
			}
			switch s = cw.GetState(); s {
			case connectivity.Ready:
				close(ch)
				return
			case connectivity.Shutdown:
				return
			}
		}
	}()
	return ch
}

// outage is the Reporter's current loss of the sidecar: when the first
// stream failed and how many streams were opened since. Guarded by
// Reporter.mu.
type outage struct {
	since    time.Time
	attempts int
}

// ReconnectStats describes the last time a Reporter got its stream back
// after losing it.
type ReconnectStats struct {
	// After is the time from the failure of the last working stream to the
	// first acknowledgement of a new one.
	After time.Duration
	// Attempts counts the streams opened in between, the one that worked
	// included: 1 when the first retry succeeded.
	Attempts int
}

// reconnected records the end of an outage at now, logs it at INFO and
// returns the figures. Called with r.mu held.
func (r *Reporter) reconnected(now time.Time) ReconnectStats {
	rs := ReconnectStats{After: now.Sub(r.out.since), Attempts: r.out.attempts}
	r.stats.Reconnects++
	r.stats.LastReconnect = rs
	return rs
}

// logReconnect logs rs at INFO.
func (r *Reporter) logReconnect(rs ReconnectStats) {
	r.log.Info(fmt.Sprintf("prefixroute: reconnected to the router after %.2f s, %d attempts", rs.After.Seconds(), rs.Attempts),
		"after_s", rs.After.Seconds(), "attempts", rs.Attempts)
}
