package server

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"
)

// The Daemon's transports: the gRPC server's options and the HTTP server of
// the probes and /metrics. (The TLS configuration they use is tls.go's.)

// serverOptions are the gRPC server's transport settings: credentials,
// message and header sizes, streams per connection, keepalive, and the
// handshake deadline (a connection that does not finish its TLS handshake
// and HTTP/2 preface within 10 s is closed).
func (d *Daemon) serverOptions(cfg *DaemonConfig) []grpc.ServerOption {
	opts := transportOptions(cfg)
	if d.tls != nil {
		opts = append(opts, grpc.Creds(d.tls.GRPCCredentials()))
	}
	return opts
}

// transportOptions are serverOptions without the credentials.
func transportOptions(cfg *DaemonConfig) []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.MaxRecvMsgSize(cfg.MaxRecvMsgBytes),
		grpc.MaxConcurrentStreams(cfg.MaxConcurrentStreams),
		grpc.MaxHeaderListSize(maxHeaderListBytes),
		grpc.ConnectionTimeout(10 * time.Second),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: 30 * time.Second, Timeout: 10 * time.Second}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 5 * time.Second, PermitWithoutStream: true}),
	}
}

// maxHeaderListBytes bounds the metadata of one call: tokens and trace
// context are well under it.
const maxHeaderListBytes = 64 << 10

// serveHTTP serves /healthz, /readyz and /metrics on the HTTP listener, over
// TLS when the gRPC listener has it, with timeouts that bound slow clients.
func (d *Daemon) serveHTTP() {
	d.http = &http.Server{Handler: d.httpHandler(), ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout: 10 * time.Second, WriteTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 64 << 10,
		ErrorLog: slog.NewLogLogger(d.log.With("component", "http").Handler(), slog.LevelDebug)} // failed handshakes, bad requests
	serve := func() error { return d.http.Serve(d.httpLis) }
	if d.tls != nil {
		d.http.TLSConfig = d.tls.HTTPConfig()
		serve = func() error { return d.http.ServeTLS(d.httpLis, "", "") }
	}
	go func() {
		if err := serve(); err != nil && !errors.Is(err, http.ErrServerClosed) {
			d.log.Error("http server stopped", "err", err)
		}
	}()
}

// httpHandler routes /healthz, /readyz, /metrics, the Pick front ends
// (httppick.go) and the console (/ui/).
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
	mux.Handle("GET /metrics", d.tel.metricsHandler())
	mux.Handle("/ui/", d.consoleHandler())
	d.picker.register(mux)
	return mux
}
