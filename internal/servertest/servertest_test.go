package servertest_test

import (
	"context"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/internal/servertest"
)

func TestMain(m *testing.M) { servertest.VerifyNoLeaks(m) }

func TestStartServesAndStops(t *testing.T) {
	s := servertest.Start(t)
	if s.Clock == nil || !s.Clock.Now().Equal(servertest.Epoch) {
		t.Fatalf("clock = %v, want a Clock at %v", s.Clock, servertest.Epoch)
	}
	ctx, cancel := context.WithTimeout(context.Background(), servertest.DefaultTimeout)
	defer cancel()
	_, err := s.Admin.ListInstances(ctx, &pb.ListInstancesRequest{Pool: "chat"})
	if status.Code(err) != codes.NotFound {
		t.Fatalf("ListInstances of an unknown pool on a fresh sidecar: %v, want NotFound", err)
	}
	addr := s.Addr()
	s.Stop()
	s.Stop() // a second Stop does nothing
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Fatalf("%s still accepts connections after Stop", addr)
	}
}

func TestEventuallyCountsPolls(t *testing.T) {
	n := 0
	servertest.Eventually(t, "third poll", func() bool { n++; return n == 3 })
	if n != 3 {
		t.Fatalf("cond called %d times, want exactly 3 (stop at the first true)", n)
	}
	servertest.EventuallyOK(t, func() string {
		if n++; n < 5 {
			return "not yet"
		}
		return ""
	})
	if n != 5 {
		t.Fatalf("cond called %d times in all, want 5", n)
	}
}

func TestNeverWatchesForItsWholeWindow(t *testing.T) {
	calls := 0
	start := time.Now()
	servertest.Never(t, "never true", 30*time.Millisecond, func() bool { calls++; return false })
	if took := time.Since(start); took < 30*time.Millisecond {
		t.Fatalf("Never returned after %v, before its 30ms window ended", took)
	}
	if calls < 2 {
		t.Fatalf("Never looked %d times in 30ms, want several (every %v)", calls, servertest.PollInterval)
	}
}

func TestDeadAddrRefuses(t *testing.T) {
	addr := servertest.DeadAddr(t)
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err == nil {
		c.Close()
		t.Fatalf("dial %s succeeded; want connection refused", addr)
	}
}
