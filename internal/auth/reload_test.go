package auth

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeClock is a clock that moves only when told. Safe for concurrent use.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

func (c *fakeClock) advance(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

// TestReloader drives a reloader of one file on a fake clock: no check
// before the interval, a check with no change loads nothing, a change
// loads at the next check, a failed load keeps the value and is retried
// at every check until it succeeds.
func TestReloader(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v")
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("one")
	loads := 0
	load := func() (*string, error) {
		loads++
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		if s := string(b); !strings.HasPrefix(s, "bad") {
			return &s, nil
		}
		return nil, errors.New("bad content")
	}
	r, err := newReloader("test value", []string{path}, time.Second, quiet, load)
	if err != nil {
		t.Fatal(err)
	}
	clock := &fakeClock{t: time.Unix(1e9, 0)}
	r.now = clock.now
	r.next.Store(clock.now().Add(time.Second).UnixNano())
	step := func(what string, advance time.Duration, wantVal string, want ReloadStats) {
		t.Helper()
		clock.advance(advance)
		if got := *r.get(); got != wantVal {
			t.Errorf("%s: value %q, want %q", what, got, wantVal)
		}
		if got := r.stats(); got != want {
			t.Errorf("%s: stats %+v, want %+v", what, got, want)
		}
	}
	step("before the interval", 0, "one", ReloadStats{})
	step("interval passed, no change", time.Second, "one", ReloadStats{Checks: 1})
	write("two!") // another size: a change even within the file system's time granularity
	step("changed, interval not passed", 999*time.Millisecond, "one", ReloadStats{Checks: 1})
	step("changed, checked", time.Millisecond, "two!", ReloadStats{Checks: 2, Reloads: 1})
	write("bad: half written")
	step("broken edit", time.Second, "two!", ReloadStats{Checks: 3, Reloads: 1, Failures: 1})
	step("broken edit, retried", time.Second, "two!", ReloadStats{Checks: 4, Reloads: 1, Failures: 2})
	write("three, whole")
	step("fixed", time.Second, "three, whole", ReloadStats{Checks: 5, Reloads: 2, Failures: 2})
	step("no change after the fix", time.Second, "three, whole", ReloadStats{Checks: 6, Reloads: 2, Failures: 2})
	if loads != 5 { // the first, two, two failures, three
		t.Errorf("%d loads, want 5", loads)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	step("file removed", time.Second, "three, whole", ReloadStats{Checks: 7, Reloads: 2, Failures: 3})
}

// TestReloaderFirstLoad: the first load must succeed, and its error is
// returned as is; a non-positive interval is the default.
func TestReloaderFirstLoad(t *testing.T) {
	boom := errors.New("boom")
	if _, err := newReloader("x", nil, 0, quiet, func() (*int, error) { return nil, boom }); !errors.Is(err, boom) {
		t.Fatalf("got %v, want boom", err)
	}
	r, err := newReloader("x", nil, 0, quiet, func() (*int, error) { v := 1; return &v, nil })
	if err != nil || r.every != DefaultReloadInterval {
		t.Fatalf("every %v (%v), want %v", r.every, err, DefaultReloadInterval)
	}
}
