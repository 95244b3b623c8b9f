package testwait

import (
	"sync"
	"time"
)

// Epoch is where every Clock starts: a fixed instant, so that times in test
// output are the same on every run.
var Epoch = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// Clock is a settable clock for a daemon under test (server.Options.Now, servertest.Start).
// The zero value is not usable; use NewClock. Safe for concurrent use.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock returns a Clock standing at Epoch.
func NewClock() *Clock { return &Clock{now: Epoch} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// Set puts the clock at t.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	c.now = t
	c.mu.Unlock()
}
