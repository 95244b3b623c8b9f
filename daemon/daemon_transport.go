package daemon

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"

	"github.com/prefixroute/prefixroute/frontend"
	"github.com/prefixroute/prefixroute/frontend/console"
	"github.com/prefixroute/prefixroute/frontend/httproute"
)

// The Daemon's transports: the gRPC server's options and the HTTP servers
// (--http-listen; --metrics-listen, which serves the probes and /metrics
// alone). (The TLS configuration they use is tls.go's.)

// serverOptions are the gRPC server's transport settings: credentials,
// message and header sizes, streams per connection, keepalive, and the
// handshake deadline (a connection that does not finish its TLS handshake
// and HTTP/2 preface within 10 s is closed).
func (d *Daemon) serverOptions(cfg *Config) []grpc.ServerOption {
	opts := transportOptions(cfg)
	if d.tls != nil {
		opts = append(opts, grpc.Creds(d.tls.GRPCCredentials()))
	}
	return opts
}

// transportOptions are serverOptions without the credentials.
func transportOptions(cfg *Config) []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.StaticStreamWindowSize(StreamWindowBytes),
		grpc.StaticConnWindowSize(ConnWindowBytes),
		grpc.MaxRecvMsgSize(cfg.MaxRecvMsgBytes),
		grpc.MaxConcurrentStreams(cfg.MaxConcurrentStreams),
		grpc.MaxHeaderListSize(maxHeaderListBytes),
		grpc.ConnectionTimeout(10 * time.Second),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: 30 * time.Second, Timeout: 10 * time.Second}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 5 * time.Second, PermitWithoutStream: true}),
	}
}

// StreamWindowBytes and ConnWindowBytes are the daemon's static HTTP/2
// flow-control windows: 1 MiB per stream (the largest report, 65536 block
// events, fits) and 16 MiB per connection (the ceiling of grpc-go's dynamic
// window). Static because the dynamic window (BDP estimation) sends a
// window update and a ping after nearly every message when messages arrive
// one at a time, as reports and Picks do: a write and a read on the
// connection for each, which was a third of the daemon's CPU per report
// (docs/history/benchmarks-2026-12-01-to-12-02.md, "Ingest, third pass").
const (
	StreamWindowBytes = 1 << 20
	ConnWindowBytes   = 16 << 20
)

// maxHeaderListBytes bounds the metadata of one call: tokens and trace
// context are well under it.
const maxHeaderListBytes = 64 << 10

// serveHTTP serves h on lis, over TLS when the gRPC listener has it, with
// timeouts that bound slow clients, and returns the server to shut down.
func (d *Daemon) serveHTTP(lis net.Listener, h http.Handler) *http.Server {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout: 10 * time.Second, WriteTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 64 << 10,
		ErrorLog: slog.NewLogLogger(d.log.With("component", "http").Handler(), slog.LevelDebug)} // failed handshakes, bad requests
	serve := func() error { return srv.Serve(lis) }
	if d.tls != nil {
		srv.TLSConfig = d.tls.HTTPConfig()
		serve = func() error { return srv.ServeTLS(lis, "", "") }
	}
	go func() {
		if err := serve(); err != nil && !errors.Is(err, http.ErrServerClosed) {
			d.log.Error("http server stopped", "addr", lis.Addr().String(), "err", err)
		}
	}()
	return srv
}

// httpHandler routes the HTTP listener (--http-listen): the probes and
// /metrics of probesHandler, the Pick front ends (frontend/httproute) and the
// console (/ui/).
func (d *Daemon) httpHandler() http.Handler {
	mux := http.NewServeMux()
	d.registerProbes(mux)
	mux.Handle("/ui/", console.Handler(d.srv, d.auth, console.Refused(d.refused)))
	d.picker.Register(mux)
	return mux
}

// probesHandler routes the read-only listener (--metrics-listen): /healthz,
// /readyz and /metrics and nothing else, which is why it may be reachable
// without a tokens file.
func (d *Daemon) probesHandler() http.Handler {
	mux := http.NewServeMux()
	d.registerProbes(mux)
	return mux
}

// registerProbes adds GET /healthz, /readyz and /metrics to mux.
func (d *Daemon) registerProbes(mux *http.ServeMux) {
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
	mux.Handle("GET /metrics", d.tel.metricsHandler())
}

// newHTTPRoutes builds POST /v1/pick and /v1/route for the HTTP listener,
// under the daemon's authentication, telemetry and exposure rule.
func (d *Daemon) newHTTPRoutes(cfg *Config) (*httproute.Handler, error) {
	refused := tokenRefusal(cfg)
	if refused != "" {
		d.log.Warn(refused)
	}
	d.refused = refused
	h := frontend.HTTP{Auth: d.auth, Refused: refused, Tracer: d.tel.tracer, Propagator: d.tel.propagator, Logger: d.log, Panicked: d.srv.Panicked}
	return httproute.New(d.srv, httproute.Options{Gateway: cfg.Gateway, MaxPrefixBlocks: d.srv.Limits().MaxPrefixBlocks,
		MaxPickBytes: cfg.MaxRecvMsgBytes, HTTP: h})
}
