package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/reflection"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
)

// DaemonConfig is what prefixrouted runs with. Zero fields take the defaults
// stated.
type DaemonConfig struct {
	// Listen is the gRPC address. Default 127.0.0.1:50051.
	Listen string
	// HTTPListen is the address of /healthz, /readyz and /metrics. Default
	// 127.0.0.1:9090; "off" disables it.
	HTTPListen string
	// MaxRecvMsgBytes bounds one gRPC message. Default 4 MiB: a Pick with
	// 8192 hashes is about 80 KiB, a report with 65536 block events about
	// 640 KiB.
	MaxRecvMsgBytes int
	// MaxConcurrentStreams bounds the streams of one connection. Default 1024.
	MaxConcurrentStreams uint32
	// Server configures the services.
	Server Options
}

// Daemon is a running prefixrouted: the gRPC server with its services,
// health and reflection, and the HTTP probe server. Stop it with Shutdown.
type Daemon struct {
	srv     *Server
	grpc    *grpc.Server
	health  *health.Server
	lis     net.Listener
	httpLis net.Listener
	http    *http.Server
	ready   atomic.Bool
	cancel  context.CancelFunc
	done    chan error
}

// Start opens the data dir, binds both listeners and serves until Shutdown.
func Start(cfg DaemonConfig) (*Daemon, error) {
	if cfg.Listen == "" {
		cfg.Listen = "127.0.0.1:50051"
	}
	if cfg.HTTPListen == "" {
		cfg.HTTPListen = "127.0.0.1:9090"
	}
	if cfg.MaxRecvMsgBytes <= 0 {
		cfg.MaxRecvMsgBytes = 4 << 20
	}
	if cfg.MaxConcurrentStreams == 0 {
		cfg.MaxConcurrentStreams = 1024
	}
	log := cfg.Server.Logger
	if log == nil {
		log = slog.Default()
		cfg.Server.Logger = log
	}
	srv, err := New(cfg.Server)
	if err != nil {
		return nil, err
	}
	d := &Daemon{srv: srv, done: make(chan error, 2)}
	d.lis, err = net.Listen("tcp", cfg.Listen)
	if err != nil {
		srv.Close()
		return nil, fmt.Errorf("listen %s (--listen): %w", cfg.Listen, err)
	}
	if cfg.HTTPListen != "off" {
		d.httpLis, err = net.Listen("tcp", cfg.HTTPListen)
		if err != nil {
			d.lis.Close()
			srv.Close()
			return nil, fmt.Errorf("listen %s (--http-listen): %w", cfg.HTTPListen, err)
		}
	}
	d.grpc = grpc.NewServer(
		grpc.MaxRecvMsgSize(cfg.MaxRecvMsgBytes),
		grpc.MaxConcurrentStreams(cfg.MaxConcurrentStreams),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: 30 * time.Second, Timeout: 10 * time.Second}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 5 * time.Second, PermitWithoutStream: true}),
	)
	srv.Register(d.grpc)
	d.health = health.NewServer()
	healthpb.RegisterHealthServer(d.grpc, d.health)
	for _, name := range []string{"", pb.PickService_ServiceDesc.ServiceName, pb.LoadService_ServiceDesc.ServiceName,
		pb.AdminService_ServiceDesc.ServiceName} {
		d.health.SetServingStatus(name, healthpb.HealthCheckResponse_SERVING)
	}
	reflection.Register(d.grpc)

	ctx, cancel := context.WithCancel(context.Background())
	d.cancel = cancel
	go srv.Sweep(ctx)
	go func() { d.done <- d.grpc.Serve(d.lis) }()
	if d.httpLis != nil {
		d.http = &http.Server{Handler: d.httpHandler(), ReadHeaderTimeout: 5 * time.Second}
		go func() {
			if err := d.http.Serve(d.httpLis); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error("http server stopped", "err", err)
			}
		}()
	}
	d.ready.Store(true)
	log.Info("prefixrouted serving", "grpc", d.lis.Addr().String(), "http", d.HTTPAddr(), "data_dir", cfg.Server.DataDir)
	return d, nil
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

// Server is the daemon's services and state.
func (d *Daemon) Server() *Server { return d.srv }

// Done receives the gRPC server's exit error, if it stops on its own.
func (d *Daemon) Done() <-chan error { return d.done }

// Shutdown stops accepting, lets in-flight calls finish until ctx ends (then
// cuts them), and releases the data dir.
func (d *Daemon) Shutdown(ctx context.Context) error {
	d.ready.Store(false)
	d.health.Shutdown()
	d.srv.Drain()
	stopped := make(chan struct{})
	go func() { d.grpc.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-ctx.Done():
		d.grpc.Stop()
		<-stopped
	}
	if d.http != nil {
		d.http.Shutdown(ctx)
	}
	d.cancel()
	return d.srv.Close()
}

func (d *Daemon) httpHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if !d.ready.Load() {
			http.Error(w, "not ready: shutting down", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready")
	})
	return mux
}
