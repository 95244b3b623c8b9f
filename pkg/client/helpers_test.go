package client_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/pkg/client"
	"github.com/prefixroute/prefixroute/server"
)

// quiet is a logger that drops everything.
var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// fakeClock is a settable clock for the daemon; safe for concurrent use.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// sidecar is one in-process daemon on loopback. Its clock stands still, so
// instances never go stale.
type sidecar struct {
	t    testing.TB
	d    *server.Daemon
	addr string
	dir  string
}

// startSidecar runs a daemon on addr ("127.0.0.1:0" for a free port) with
// the data dir dir (a new temp dir when ""), stopped at the end of the test.
// cfg may set limits and the report interval.
func startSidecar(t testing.TB, addr, dir string, opts ...func(*server.DaemonConfig)) *sidecar {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	clock := &fakeClock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	cfg := server.DaemonConfig{Listen: addr, HTTPListen: "off",
		Server: server.Options{DataDir: dir, Now: clock.Now, Logger: quiet}}
	for _, o := range opts {
		o(&cfg)
	}
	d, err := server.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s := &sidecar{t: t, d: d, addr: d.Addr(), dir: dir}
	t.Cleanup(s.stop)
	return s
}

// stop shuts the daemon down; a second call does nothing.
func (s *sidecar) stop() {
	if s.d == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.d.Shutdown(ctx); err != nil {
		s.t.Errorf("shutdown: %v", err)
	}
	s.d = nil
}

// restart stops the daemon and starts a new one on the same address and
// data dir.
func (s *sidecar) restart(opts ...func(*server.DaemonConfig)) *sidecar {
	s.t.Helper()
	s.stop()
	return startSidecar(s.t, s.addr, s.dir, opts...)
}

// dial returns a Dial connection to addr, closed at the end of the test.
func dial(t testing.TB, addr string) *grpc.ClientConn {
	t.Helper()
	cc, err := client.Dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

// deadAddr returns a loopback address nothing listens on.
func deadAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// eventually polls cond every 10ms until it returns "" or 20s pass, then
// fails with cond's last complaint. For asynchronous outcomes only.
func eventually(t *testing.T, cond func() string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		msg := cond()
		if msg == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting: %s", msg)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// instanceStatus returns the sidecar's view of one instance, or nil.
func instanceStatus(cc grpc.ClientConnInterface, pool, id string) *pb.InstanceStatus {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	resp, err := pb.NewAdminServiceClient(cc).ListInstances(ctx, &pb.ListInstancesRequest{Pool: pool})
	if err != nil {
		return nil
	}
	for _, in := range resp.GetInstances() {
		if in.GetInstanceId() == id {
			return in
		}
	}
	return nil
}

// idle is a Load callback of an idle instance with room for a million
// blocks.
func idle() client.Load {
	return client.Load{PrefillTokensPerSecond: 10000, KVCapacityBlocks: 1 << 20, BlockSizeTokens: 16}
}

// reporter starts a Reporter with fast backoff, closed at the end of the
// test.
func reporter(t *testing.T, cc grpc.ClientConnInterface, opts client.ReporterOptions) *client.Reporter {
	t.Helper()
	if opts.Load == nil {
		opts.Load = idle
	}
	if opts.Address == "" {
		opts.Address = opts.InstanceID + ":8000"
	}
	opts.MinBackoff, opts.MaxBackoff = 5*time.Millisecond, 100*time.Millisecond
	opts.Logger = quiet
	r, err := client.NewReporter(cc, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeReporter(t, r) })
	return r
}

func u64(v uint64) *uint64 { return &v }

// iota32 returns the token ids from, from+1, ..., from+n-1.
func iota32(from, n int) []uint32 {
	out := make([]uint32, n)
	for i := range out {
		out[i] = uint32(from + i)
	}
	return out
}

// closeReporter closes r and reports a Close error with t.Error; for defer
// and t.Cleanup.
func closeReporter(t testing.TB, r *client.Reporter) {
	t.Helper()
	if err := r.Close(); err != nil {
		t.Errorf("Reporter.Close: %v", err)
	}
}
