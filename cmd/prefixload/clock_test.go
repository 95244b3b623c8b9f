package main

import (
	"context"
	"sync"
	"time"
)

// stepClock ticks only inside the measured window: window waits until
// senders tickers exist, delivers ticks rounds of one tick to each, every
// round waiting until each sender has sent its report, then lets the rest
// of the window's wall time pass. So a window sends exactly ticks reports
// per sender. Safe for concurrent use.
type stepClock struct {
	senders, ticks int

	mu      sync.Mutex
	tickers []*stepTicker
	ready   chan struct{} // closed when the senders-th ticker exists
	round   sync.WaitGroup
}

func newStepClock(senders, ticks int) *stepClock {
	return &stepClock{senders: senders, ticks: ticks, ready: make(chan struct{})}
}

func (c *stepClock) ticker(time.Duration, time.Duration) ticker {
	t := &stepTicker{c: make(chan struct{}, 1), clk: c}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.tickers = append(c.tickers, t)
	if len(c.tickers) == c.senders {
		close(c.ready)
	}
	return t
}

func (c *stepClock) window(ctx context.Context, d time.Duration) {
	start := time.Now()
	select {
	case <-ctx.Done():
		return
	case <-c.ready:
	}
	c.mu.Lock()
	all := c.tickers
	c.mu.Unlock()
	for range c.ticks {
		c.round.Add(len(all))
		for _, t := range all {
			t.c <- struct{}{}
		}
		c.round.Wait()
	}
	wallClock{}.window(ctx, d-time.Since(start))
}

// stepTicker is one sender's ticker of a stepClock.
type stepTicker struct {
	c   chan struct{}
	clk *stepClock
}

func (t *stepTicker) wait(ctx context.Context, stop <-chan struct{}) bool {
	select {
	case <-ctx.Done():
		return false
	case <-stop:
		return true
	case <-t.c:
		return true
	}
}

func (t *stepTicker) handled() { t.clk.round.Done() }

func (*stepTicker) stop() {}
