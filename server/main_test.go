package server_test

import (
	"testing"

	"github.com/prefixroute/prefixroute/internal/servertest"
)

// TestMain fails the package's run when a test leaves a goroutine behind (a
// daemon, stream, link or reporter it did not stop).
func TestMain(m *testing.M) { servertest.VerifyNoLeaks(m) }
