package client_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"google.golang.org/grpc"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/daemon"
	"github.com/prefixroute/prefixroute/internal/servertest"
	"github.com/prefixroute/prefixroute/internal/testwait"
	"github.com/prefixroute/prefixroute/pkg/client"
)

// quiet is a logger that drops everything.
var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// TestMain fails the package's tests if they leave goroutines running.
func TestMain(m *testing.M) { servertest.VerifyNoLeaks(m) }

// sidecar is one in-process daemon on loopback (servertest.Start). Its clock
// stands still, so instances never go stale.
type sidecar struct {
	*servertest.Sidecar
	t    testing.TB
	addr string
}

// startSidecar runs a daemon on addr ("127.0.0.1:0" for a free port) with
// the data dir dir (a new temp dir when ""), stopped at the end of the test.
// opts may set limits and the report interval.
func startSidecar(t testing.TB, addr, dir string, opts ...func(*daemon.Config)) *sidecar {
	t.Helper()
	o := []servertest.Option{servertest.Config(func(c *daemon.Config) { c.Listen, c.HTTPListen = addr, "off" })}
	if dir != "" {
		o = append(o, servertest.Dir(dir))
	}
	for _, f := range opts {
		o = append(o, servertest.Config(f))
	}
	ss := servertest.Start(t, o...)
	return &sidecar{Sidecar: ss, t: t, addr: ss.Addr()}
}

// stop shuts the daemon down; a second call does nothing.
func (s *sidecar) stop() { s.Stop() }

// restart stops the daemon and starts a new one on the same address and
// data dir.
func (s *sidecar) restart(opts ...func(*daemon.Config)) *sidecar {
	s.t.Helper()
	s.stop()
	return startSidecar(s.t, s.addr, s.Dir, opts...)
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

// cachedBlocks waits until the sidecar lists the instance as ok with want
// cached blocks.
func cachedBlocks(t *testing.T, s *sidecar, cc grpc.ClientConnInterface, pool, id string, want uint64) {
	t.Helper()
	testwait.EventuallyOK(t, func() string {
		in := instanceStatus(cc, pool, id)
		switch {
		case in == nil:
			return fmt.Sprintf("sidecar %s does not list instance %q", s.addr, id)
		case in.GetState() != pb.InstanceState_INSTANCE_STATE_OK || in.GetCachedBlocks() != want:
			return fmt.Sprintf("instance %q is %v with %d cached blocks, want ok with %d",
				id, in.GetState(), in.GetCachedBlocks(), want)
		}
		return ""
	})
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

// reporter starts a Reporter with fast backoff (unless opts set
// MaxBackoff), closed at the end of the
// test.
func reporter(t *testing.T, cc grpc.ClientConnInterface, opts client.ReporterOptions) *client.Reporter {
	t.Helper()
	if opts.Load == nil {
		opts.Load = idle
	}
	if opts.Address == "" {
		opts.Address = opts.InstanceID + ":8000"
	}
	if opts.MaxBackoff == 0 {
		opts.MinBackoff, opts.MaxBackoff = 5*time.Millisecond, 100*time.Millisecond
	}
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
