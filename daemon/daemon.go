package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/netutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/frontend"
	"github.com/prefixroute/prefixroute/frontend/httproute"
	"github.com/prefixroute/prefixroute/internal/auth"
	"github.com/prefixroute/prefixroute/internal/gateway"
	"github.com/prefixroute/prefixroute/pkg/client"
	"github.com/prefixroute/prefixroute/server"
)

// Defaults of Config, which prefixrouted's flags show.
const (
	// DefaultListen is the gRPC address: loopback, the safe default
	// without a tokens file (127.0.0.1:50051, client.DefaultAddr, which
	// clients such as prefixctl dial by default).
	DefaultListen = client.DefaultAddr
	// DefaultHTTPListen is the address of the HTTP listener (/healthz,
	// /readyz, /metrics, the HTTP front ends and the console /ui/).
	DefaultHTTPListen = "127.0.0.1:9090"
	// DefaultMetricsListen is the address of the read-only listener of
	// /healthz, /readyz and /metrics: off.
	DefaultMetricsListen = "off"
	// DefaultMaxRecvMsgBytes bounds one gRPC message: 4 MiB.
	DefaultMaxRecvMsgBytes = 4 << 20
	// DefaultMaxConcurrentStreams bounds the streams of one connection.
	DefaultMaxConcurrentStreams = 1024
)

// Config is what prefixrouted runs with. Zero fields take the defaults
// stated.
type Config struct {
	// Listen is the gRPC address. Default DefaultListen (127.0.0.1:50051).
	Listen string
	// HTTPListen is the address of /healthz, /readyz, /metrics and /ui/. Default
	// DefaultHTTPListen (127.0.0.1:9090); "off" disables it.
	HTTPListen string
	// MetricsListen is the address of a second HTTP listener serving only
	// /healthz, /readyz and /metrics: read-only, so it may be on any
	// address without a tokens file (for kubelet probes and Prometheus on
	// the pod IP). Default DefaultMetricsListen ("off").
	MetricsListen string
	// MaxRecvMsgBytes bounds one gRPC message. Default 4 MiB: a Pick with
	// 8192 hashes is about 80 KiB, a report with 65536 block events about
	// 640 KiB.
	MaxRecvMsgBytes int
	// MaxConcurrentStreams bounds the streams of one connection. Default 1024.
	MaxConcurrentStreams uint32
	// Server configures the services.
	Server server.Options
	// DecisionLog is a file to append sampled Picks to as JSON lines (see
	// README "Decision log"); "" turns the decision log off.
	DecisionLog string
	// DecisionLogRate is the fraction of Picks the decision log samples, in
	// [0, 1]; 0 logs none.
	DecisionLogRate float64
	// DecisionLogBuffer bounds the sampled Picks waiting for the disk; more
	// are dropped and counted. Default DefaultDecisionLogBuffer.
	DecisionLogBuffer int
	// TokensFile turns authentication on: the identities, roles and
	// bindings it lists (SECURITY.md), reloaded when it changes. Without it
	// every call is allowed, so both listeners must be on loopback.
	TokensFile string
	// TLS serves both listeners over TLS and verifies client certificates.
	TLS auth.TLSFiles
	// Insecure allows a non-loopback listener without a tokens file, or
	// the gRPC one without TLS.
	Insecure bool
	// Transport bounds connections and report streams.
	Transport TransportLimits
	// CgroupRoot is where the cgroup file system is read for the memory
	// limit that Server.Limits.MaxIndexPairs is derived from when it is 0
	// (memcap.go). Default DefaultCgroupRoot.
	CgroupRoot string
	// Gateway maps a gateway's HTTP request (an OpenAI body) to a Pick:
	// its pool, prefix hashes and prompt length, and the body limit. The
	// HTTP listener's POST /v1/route uses it (frontend/httproute).
	Gateway gateway.Config
	// FrontEnds are served on listeners of their own (frontend.go): the
	// Envoy ext_proc endpoint picker. One with an empty Listen is off.
	FrontEnds []frontend.GRPC

	// testUnary, when set, is chained innermost around every unary handler.
	// TestShutdownFinishesInFlightPicks holds a Pick inside its handler with
	// it. It stays a field: Start must read it, and a package-level hook
	// (set from export_test.go) would be shared by every daemon of a test
	// binary. Unexported, so outside the package it is not there.
	testUnary grpc.UnaryServerInterceptor
}

// Daemon is a running prefixrouted: the gRPC server with its services,
// health and reflection behind the telemetry middleware, the HTTP server
// of the probes, /metrics and the HTTP front ends, and the optional
// read-only server of the probes and /metrics alone. Stop it with Shutdown. Its methods are safe for
// concurrent use.
type Daemon struct {
	log     *slog.Logger
	tel     *telemetry
	srv     *server.Server
	grpc    *grpc.Server
	health  *health.Server
	lis     net.Listener
	httpLis net.Listener
	http    *http.Server
	metLis  net.Listener // nil: --metrics-listen off
	metrics *http.Server
	auth    frontend.Authorizer // nil: authentication off
	tls     listenerTLS         // nil: plaintext
	picker  *httproute.Handler  // POST /v1/pick and /v1/route on the HTTP listener
	// refused is why the HTTP listener takes no bearer token (tokenRefusal),
	// or "".
	refused string
	fronts  []*frontEnd // the front ends with a listener
	ready   atomic.Bool
	cancel  context.CancelFunc
	done    chan error

	calls    inflight
	shutOnce sync.Once
	shutErr  error
}

// Start opens the data dir, sets up telemetry (traces per the OTEL_*
// environment, metrics for /metrics), binds both listeners and serves until
// Shutdown.
func Start(cfg Config) (*Daemon, error) {
	if cfg.Listen == "" {
		cfg.Listen = DefaultListen
	}
	if cfg.HTTPListen == "" {
		cfg.HTTPListen = DefaultHTTPListen
	}
	if cfg.MetricsListen == "" {
		cfg.MetricsListen = DefaultMetricsListen
	}
	if cfg.MaxRecvMsgBytes <= 0 {
		cfg.MaxRecvMsgBytes = DefaultMaxRecvMsgBytes
	}
	if cfg.MaxConcurrentStreams == 0 {
		cfg.MaxConcurrentStreams = DefaultMaxConcurrentStreams
	}
	cfg.Transport = cfg.Transport.withDefaults()
	if iv := cfg.Server.ReportInterval; iv > 0 && iv.Seconds()*cfg.Transport.ReportsPerSecond < 1 {
		return nil, fmt.Errorf("report interval %v asks instances for %.0f reports/s, over the limit of %g reports/s per stream (--max-reports-per-second): they would be cut off",
			iv, 1/iv.Seconds(), cfg.Transport.ReportsPerSecond)
	}
	if err := checkExposure(&cfg); err != nil {
		return nil, err
	}
	if err := cfg.TLS.Check(); err != nil {
		return nil, err
	}
	log := cfg.Server.Logger
	if log == nil {
		log = slog.Default()
		cfg.Server.Logger = log
	}
	if cfg.Server.Now == nil {
		cfg.Server.Now = time.Now
	}
	log.Info(applyIndexCap(&cfg).String())
	d := &Daemon{log: log, done: make(chan error, 2+len(cfg.FrontEnds))}
	if err := d.start(&cfg); err != nil {
		d.release(context.Background())
		return nil, err
	}
	srv := d.srv
	d.grpc = grpc.NewServer(append(middleware(log, d.tel, srv, &d.calls, d.authFunc(), cfg.testUnary),
		d.serverOptions(&cfg)...)...)
	srv.Register(d.grpc)
	d.health = health.NewServer()
	healthpb.RegisterHealthServer(d.grpc, d.health)
	for _, name := range []string{"", pb.PickService_ServiceDesc.ServiceName, pb.LoadService_ServiceDesc.ServiceName,
		pb.AdminService_ServiceDesc.ServiceName} {
		d.health.SetServingStatus(name, healthpb.HealthCheckResponse_SERVING)
	}
	reflection.Register(d.grpc)
	if err := d.serveFrontEnds(&cfg); err != nil {
		d.stopFrontEnds()
		d.release(context.Background())
		return nil, err
	}

	ctx, cancel := context.WithCancel(context.Background())
	d.cancel = cancel
	srv.StartCluster()
	go srv.Sweep(ctx)
	go srv.RunRamps(ctx)
	go func() { d.done <- d.grpc.Serve(d.lis) }()
	if d.httpLis != nil {
		d.http = d.serveHTTP(d.httpLis, d.httpHandler())
	}
	if d.metLis != nil {
		d.metrics = d.serveHTTP(d.metLis, d.probesHandler())
	}
	d.ready.Store(true)
	log.Info("prefixrouted serving", "grpc", d.lis.Addr().String(), "http", orOff(d.HTTPAddr()), "metrics", orOff(d.MetricsAddr()), "data_dir", cfg.Server.DataDir,
		"traces", d.tel.exporter, "decision_log", cfg.DecisionLog, "auth", cfg.TokensFile != "", "tls", d.tls != nil,
		"client_ca", cfg.TLS.ClientCAFile != "", "limits", cfg.Transport.String())
	return d, nil
}

// start acquires what Start needs, in order: telemetry, the server with its
// observer, the decision log, both listeners. On error the caller releases
// what was acquired.
func (d *Daemon) start(cfg *Config) error {
	var err error
	if d.tel, err = newTelemetry(context.Background()); err != nil {
		return err
	}
	if d.srv, err = server.New(cfg.Server); err != nil {
		return err
	}
	meter := d.tel.meter.Meter("github.com/prefixroute/prefixroute/server")
	if err := d.srv.Observe(meter, server.DecisionLogConfig{Path: cfg.DecisionLog, Rate: cfg.DecisionLogRate, Buffer: cfg.DecisionLogBuffer}); err != nil {
		return err
	}
	if err := d.startSecurity(cfg, meter); err != nil {
		return err
	}
	if d.picker, err = d.newHTTPRoutes(cfg); err != nil {
		return err
	}
	if d.lis, err = net.Listen("tcp", cfg.Listen); err != nil {
		return fmt.Errorf("listen %s (--listen): %w", cfg.Listen, err)
	}
	d.lis = netutil.LimitListener(d.lis, cfg.Transport.MaxConnections)
	if cfg.HTTPListen != "off" {
		if d.httpLis, err = net.Listen("tcp", cfg.HTTPListen); err != nil {
			return fmt.Errorf("listen %s (--http-listen): %w", cfg.HTTPListen, err)
		}
		// It serves picks too (POST /v1/route, /v1/pick): the same bound.
		d.httpLis = netutil.LimitListener(d.httpLis, cfg.Transport.MaxConnections)
	}
	if cfg.MetricsListen != "off" {
		if d.metLis, err = net.Listen("tcp", cfg.MetricsListen); err != nil {
			return fmt.Errorf("listen %s (--metrics-listen): %w", cfg.MetricsListen, err)
		}
	}
	return d.listenFrontEnds(cfg)
}

// release frees what start acquired, for a failed Start.
func (d *Daemon) release(ctx context.Context) {
	for _, l := range []net.Listener{d.lis, d.httpLis, d.metLis} {
		if l != nil {
			l.Close()
		}
	}
	for _, fe := range d.fronts {
		if fe.lis != nil {
			fe.lis.Close()
		}
	}
	// Start's error is the one returned; what fails here is logged.
	if d.srv != nil {
		if err := d.srv.CloseDecisionLog(ctx); err != nil {
			d.log.Warn("failed start: decision log not fully written", "err", err)
		}
		if err := d.srv.Close(); err != nil {
			d.log.Warn("failed start: closing the server", "err", err)
		}
	}
	if d.tel != nil {
		if err := d.tel.Shutdown(ctx); err != nil {
			d.log.Warn("failed start: telemetry not flushed", "err", err)
		}
	}
}

// Addr is the gRPC listener's address.
func (d *Daemon) Addr() string { return d.lis.Addr().String() }

// HTTPAddr is the HTTP listener's address, or "" when it is off.
func (d *Daemon) HTTPAddr() string {
	if d.httpLis == nil {
		return ""
	}
	return d.httpLis.Addr().String()
}

// orOff is addr, or "off" for a listener that is not there (the flag's word).
func orOff(addr string) string {
	if addr == "" {
		return "off"
	}
	return addr
}

// MetricsAddr is the read-only probes and /metrics listener's address, or
// "" when it is off.
func (d *Daemon) MetricsAddr() string {
	if d.metLis == nil {
		return ""
	}
	return d.metLis.Addr().String()
}

// Server is the daemon's services and state.
func (d *Daemon) Server() *server.Server { return d.srv }

// Done receives the gRPC server's exit error, if it stops on its own.
func (d *Daemon) Done() <-chan error { return d.done }

// Shutdown stops the daemon within ctx: /readyz and the gRPC health service
// turn NOT_SERVING, the gRPC server stops accepting (GOAWAY) and lets
// in-flight calls finish (cut when ctx ends); once no unary call has run for
// drainSettle the report streams end with Unavailable (instances reconnect
// elsewhere); then the decision log is flushed, the HTTP
// server stops, spans and metrics are flushed and the data dir is released.
// Only a failure to release the data dir is returned; telemetry that could
// not be flushed is logged. Later calls wait for the first and return its
// result.
func (d *Daemon) Shutdown(ctx context.Context) error {
	d.shutOnce.Do(func() { d.shutErr = d.shutdown(ctx) })
	return d.shutErr
}

func (d *Daemon) shutdown(ctx context.Context) error {
	d.ready.Store(false)
	d.health.Shutdown()
	stopped := make(chan struct{})
	go func() { d.grpc.GracefulStop(); d.gracefulStopFrontEnds(); close(stopped) }()
	// The report streams end only once the unary calls are done: a pick
	// still in flight (or sent before the client saw GOAWAY) is decided on
	// the instances as they were, not on instances Drain just disconnected.
	d.calls.idle(ctx, drainSettle)
	d.srv.Drain()
	select {
	case <-stopped:
	case <-ctx.Done():
		d.log.Warn("shutdown timeout: cutting the calls still in flight", "err", ctx.Err())
		d.grpc.Stop()
		d.stopFrontEnds()
		<-stopped
	}
	d.cancel()
	if err := d.srv.CloseDecisionLog(ctx); err != nil {
		d.log.Warn("decision log not fully written", "err", err)
	}
	for _, h := range []*http.Server{d.http, d.metrics} {
		if h != nil {
			if err := h.Shutdown(ctx); err != nil {
				d.log.Warn("shutdown timeout: closing the HTTP connections still open", "addr", h.Addr, "err", err)
			}
		}
	}
	if err := d.tel.Shutdown(ctx); err != nil {
		d.log.Warn("telemetry not flushed", "err", err)
	}
	return d.srv.Close()
}
