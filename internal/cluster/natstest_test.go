package cluster

import (
	"context"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func testConfig(url, name string) Config {
	return Config{
		URLs:            []string{url},
		Name:            name,
		ReconnectWait:   50 * time.Millisecond,
		ReconnectJitter: 10 * time.Millisecond,
		ApplyTimeout:    2 * time.Second,
		SnapshotTimeout: 2 * time.Second,
	}
}

// dial dials a Link closed at cleanup.
func dial(t testing.TB, cfg Config, h Handlers) *Link {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := Dial(ctx, cfg, h)
	if err != nil {
		t.Fatalf("Dial %s: %v", cfg.Name, err)
	}
	t.Cleanup(l.Close)
	return l
}

// TestMain fails the package's tests if they leave goroutines running. It
// calls goleak directly: internal/servertest imports this package.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
