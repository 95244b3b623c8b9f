package testwait

import (
	"net"
	"testing"
	"time"
)

// Timeouts shared by every test that waits on something asynchronous. They
// bound a stuck test; they are not performance limits, and no test passes
// because something was fast.
const (
	// DefaultTimeout bounds Eventually: how long a condition that must
	// come true may take before the test fails. Generous, for a loaded
	// 2-core CI machine under -race.
	DefaultTimeout = 20 * time.Second
	// ShortTimeout is how long Never watches a condition that must stay
	// false. A negative check can only ever pass vacuously after a finite
	// wait; prefer asserting on a counter that proves the event was
	// processed, and use Never where no such counter exists.
	ShortTimeout = 200 * time.Millisecond
	// PollInterval is how often Eventually and Never look.
	PollInterval = 5 * time.Millisecond
)

// Eventually polls cond every PollInterval until it returns true and returns
// how long that took, or fails the test after DefaultTimeout with what.
func Eventually(t testing.TB, what string, cond func() bool) time.Duration {
	t.Helper()
	return EventuallyWithin(t, DefaultTimeout, what, cond)
}

// EventuallyWithin is Eventually with its own bound.
func EventuallyWithin(t testing.TB, bound time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	took, ok := poll(bound, func() string {
		if cond() {
			return ""
		}
		return "not yet"
	})
	if !ok {
		t.Fatalf("%s: not true after %v", what, bound)
	}
	return took
}

// EventuallyOK polls cond until it returns "" (satisfied), or fails after
// DefaultTimeout with cond's last complaint, which says what was wrong.
func EventuallyOK(t testing.TB, cond func() string) time.Duration {
	t.Helper()
	var last string
	took, ok := poll(DefaultTimeout, func() string { last = cond(); return last })
	if !ok {
		t.Fatalf("not after %v: %s", DefaultTimeout, last)
	}
	return took
}

// poll calls cond every PollInterval until it returns "" (true, and how long
// that took) or bound has passed (false).
func poll(bound time.Duration, cond func() string) (time.Duration, bool) {
	start := time.Now()
	for {
		if cond() == "" {
			return time.Since(start), true
		}
		if time.Since(start) > bound {
			return 0, false
		}
		time.Sleep(PollInterval)
	}
}

// Never fails the test if cond becomes true within d (ShortTimeout when d
// is 0), polling every PollInterval, from the start of the window to its
// end (so at least twice, however loaded the machine).
func Never(t testing.TB, what string, d time.Duration, cond func() bool) {
	t.Helper()
	if d <= 0 {
		d = ShortTimeout
	}
	deadline := time.Now().Add(d)
	for {
		if cond() {
			t.Fatalf("%s: happened within %v", what, d)
		}
		if !time.Now().Before(deadline) {
			return // the last look was at or after the window's end
		}
		time.Sleep(PollInterval)
	}
}

// DeadAddr returns a loopback address nothing listens on: a port the kernel
// handed out and that was closed again. Connecting to it is refused.
func DeadAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}
