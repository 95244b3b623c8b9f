package main

import (
	"context"
	"time"
)

// clock paces a load test: the report senders' ticks and the measured
// window. wallClock is the real one; the tests use one whose ticks they
// count.
type clock interface {
	// ticker paces one sender reporting every period, from phase on.
	ticker(every, phase time.Duration) ticker
	// window returns at the end of a measured window of d (or when ctx
	// is done).
	window(ctx context.Context, d time.Duration)
}

// ticker paces one sender. Its methods are called by that sender only.
type ticker interface {
	// wait blocks until the next tick or until stop is closed (true), or
	// until ctx is done (false).
	wait(ctx context.Context, stop <-chan struct{}) bool
	// handled says the tick's report went out (or failed to).
	handled()
	// stop releases the ticker.
	stop()
}

// wallClock is real time: each sender sleeps its phase, then ticks every
// period (a slow sender drops ticks, as time.Ticker does).
type wallClock struct{}

func (wallClock) ticker(every, phase time.Duration) ticker {
	return &wallTicker{every: every, phase: phase}
}

func (wallClock) window(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// wallTicker is a time.Ticker started after a phase, on the first wait.
type wallTicker struct {
	every, phase time.Duration
	t            *time.Ticker
}

func (w *wallTicker) wait(ctx context.Context, stop <-chan struct{}) bool {
	if w.t == nil {
		phase := time.NewTimer(w.phase)
		select {
		case <-ctx.Done():
			phase.Stop()
			return false
		case <-stop:
			phase.Stop()
			return true
		case <-phase.C:
		}
		w.t = time.NewTicker(w.every)
	}
	select {
	case <-ctx.Done():
		return false
	case <-stop:
		return true
	case <-w.t.C:
		return true
	}
}

func (*wallTicker) handled() {}

func (w *wallTicker) stop() {
	if w.t != nil {
		w.t.Stop()
	}
}
