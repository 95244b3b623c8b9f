package server

import (
	"crypto/tls"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"google.golang.org/grpc/credentials"

	"github.com/prefixroute/prefixroute/internal/auth"
)

// TLSFiles names the PEM files of the listeners' TLS (auth.TLSFiles says
// how they are used and reloaded).
type TLSFiles = auth.TLSFiles

// listenerTLS is the listeners' TLS, reloaded when its files change:
// *auth.TLSServer. Safe for concurrent use.
type listenerTLS interface {
	// GRPCCredentials are the gRPC listener's transport credentials.
	GRPCCredentials() credentials.TransportCredentials
	// HTTPConfig is the HTTP listener's TLS config.
	HTTPConfig() *tls.Config
}

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
