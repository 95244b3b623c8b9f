package servertest

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/daemon"
	"github.com/prefixroute/prefixroute/internal/cluster"
	"github.com/prefixroute/prefixroute/server"
)

// Sidecar is one prefixrouted started in-process on loopback by Start, with
// a client connection and a client of each service. It is shut down at the
// end of the test. Its fields are set once by Start; Stop is safe to call
// more than once but not concurrently.
type Sidecar struct {
	T     testing.TB
	D     *daemon.Daemon
	Dir   string // the data dir
	Clock *Clock // nil with RealClock
	Conn  *grpc.ClientConn
	Pick  pb.PickServiceClient
	Load  pb.LoadServiceClient
	Admin pb.AdminServiceClient
}

// Option changes how Start configures a sidecar.
type Option func(*options)

type options struct {
	dir      string
	real     bool
	logger   *slog.Logger
	mutators []func(*daemon.Config)
}

// Dir uses dir as the data dir instead of a new temporary one (to restart a
// sidecar on the state of a previous one).
func Dir(dir string) Option { return func(o *options) { o.dir = dir } }

// RealClock runs the daemon on the wall clock instead of a Clock.
func RealClock() Option { return func(o *options) { o.real = true } }

// Logger sends the daemon's log to l instead of discarding it.
func Logger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// Config applies mutate to the daemon's configuration after the harness's
// defaults (loopback listeners, data dir, clock, quiet logger).
func Config(mutate func(*daemon.Config)) Option {
	return func(o *options) { o.mutators = append(o.mutators, mutate) }
}

// Replica joins the sidecar to the NATS server at url as replica name, with
// the short flush, apply and reconnect intervals every replica test uses,
// and the ramp driver slowed to once an hour (tests step ramps themselves).
func Replica(url, name string) Option {
	return Config(func(c *daemon.Config) {
		c.Server.RampTick = time.Hour
		c.Server.Cluster = &cluster.Config{URLs: []string{url}, Name: name, FlushInterval: time.Millisecond,
			ApplyTimeout: 2 * time.Second, ReconnectWait: 50 * time.Millisecond, ReconnectJitter: 10 * time.Millisecond}
	})
}

// Start runs a daemon on 127.0.0.1:0 (gRPC and HTTP), with a new temporary
// data dir, a Clock at Epoch and a discarded log unless opts say otherwise,
// and dials it. The daemon is shut down when the test ends; a shutdown
// error fails the test.
func Start(t testing.TB, opts ...Option) *Sidecar {
	t.Helper()
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	if o.dir == "" {
		o.dir = t.TempDir()
	}
	if o.logger == nil {
		o.logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	s := &Sidecar{T: t, Dir: o.dir}
	cfg := daemon.Config{
		Listen: "127.0.0.1:0", HTTPListen: "127.0.0.1:0",
		Server: server.Options{DataDir: o.dir, Logger: o.logger},
	}
	if !o.real {
		s.Clock = NewClock()
		cfg.Server.Now = s.Clock.Now
	}
	for _, m := range o.mutators {
		m(&cfg)
	}
	d, err := daemon.Start(cfg)
	if err != nil {
		t.Fatalf("start prefixrouted: %v", err)
	}
	s.D = d
	s.Conn, err = grpc.NewClient(d.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatalf("dial %s: %v", d.Addr(), err)
	}
	s.Pick, s.Load, s.Admin = pb.NewPickServiceClient(s.Conn), pb.NewLoadServiceClient(s.Conn), pb.NewAdminServiceClient(s.Conn)
	t.Cleanup(s.Stop)
	return s
}

// Addr is the sidecar's gRPC address.
func (s *Sidecar) Addr() string { return s.D.Addr() }

// HTTPAddr is the address of the sidecar's probes and /metrics.
func (s *Sidecar) HTTPAddr() string { return s.D.HTTPAddr() }

// Stop closes the client connection and shuts the daemon down, failing the
// test if that takes longer than DefaultTimeout or returns an error. A second
// call does nothing.
func (s *Sidecar) Stop() {
	if s.D == nil {
		return
	}
	if err := s.Conn.Close(); err != nil {
		s.T.Errorf("close client connection: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), DefaultTimeout)
	defer cancel()
	if err := s.D.Shutdown(ctx); err != nil {
		s.T.Errorf("shutdown: %v", err)
	}
	s.D = nil
}
