package server

import (
	"context"
	"errors"
	"fmt"

	grpcauth "github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/auth"
	"go.opentelemetry.io/otel/metric"
	"google.golang.org/grpc"

	"github.com/prefixroute/prefixroute/internal/auth"
	"github.com/prefixroute/prefixroute/internal/netaddr"
)

// authorizer decides whether a call may run: *auth.Authenticator, which
// authenticates the caller by the tokens file and authorizes the method by
// its table. Authorize returns the context the handler runs with (carrying
// the caller, auth.CallerFrom) or a status error. Safe for concurrent use.
type authorizer interface {
	Authorize(ctx context.Context, fullMethod string) (context.Context, error)
}

// startSecurity loads the tokens file and the TLS files and sets up the
// stream limits, for Start.
func (d *Daemon) startSecurity(cfg *DaemonConfig, meter metric.Meter) error {
	if cfg.TokensFile != "" {
		a, err := auth.NewAuthenticator(cfg.TokensFile, cfg.TLS.ReloadInterval, d.log)
		if err != nil {
			return err
		}
		d.auth = a
	}
	if cfg.TLS.Enabled() {
		t, err := auth.NewTLSServer(cfg.TLS, d.log)
		if err != nil {
			return err
		}
		d.tls = t
	}
	if cfg.TLS.ClientCAFile != "" && d.auth == nil {
		return errors.New("--tls-client-ca needs --tokens-file, which maps client certificates to roles")
	}
	if cfg.Insecure && (d.auth == nil || d.tls == nil) {
		d.log.Warn("--insecure: listeners may be reachable without authentication or TLS; see SECURITY.md",
			"auth", d.auth != nil, "tls", d.tls != nil)
	}
	t := cfg.Transport
	return d.srv.LimitReports(ReportLimits{MaxStreams: t.MaxReportStreams, PerSecond: t.ReportsPerSecond,
		Burst: t.ReportBurst, FirstReportTimeout: t.FirstReportTimeout}, meter)
}

// authFunc is the auth interceptors' function, or nil when authentication
// is off.
func (d *Daemon) authFunc() grpcauth.AuthFunc {
	if d.auth == nil {
		return nil
	}
	a := d.auth
	return func(ctx context.Context) (context.Context, error) {
		method, _ := grpc.Method(ctx)
		return a.Authorize(ctx, method)
	}
}

// SetSecurity sets the tokens file (authentication on) and the TLS files
// of the listeners in one call; internal/testpki's PKI.Secure uses it.
func (c *DaemonConfig) SetSecurity(tokensFile string, tls TLSFiles) {
	c.TokensFile, c.TLS = tokensFile, tls
}

// checkExposure enforces the safe default: without a tokens file (no
// authentication) the gRPC and HTTP listeners stay on loopback, and bearer
// tokens never cross a network in cleartext, unless insecure is set. The
// metrics listener is exempt: it serves only /healthz, /readyz and
// /metrics, which change nothing. The error is one line saying why and
// what to do.
func checkExposure(cfg *DaemonConfig) error {
	if cfg.Insecure {
		return nil
	}
	authOn, tlsOn := cfg.TokensFile != "", cfg.TLS.Enabled()
	for _, l := range []struct{ flag, addr, why string }{
		{"--listen", cfg.Listen, "anyone who can reach it could steer traffic (SetWeights, forged load reports)"},
		{"--http-listen", cfg.HTTPListen, "anyone who can reach it could read and steer routing (the HTTP pick and route endpoints, the console); for probes and /metrics alone use --metrics-listen, which may listen anywhere"},
	} {
		if l.addr == "off" || netaddr.IsLoopback(l.addr) {
			continue
		}
		switch {
		case !authOn:
			return fmt.Errorf("refusing %s %s: no --tokens-file is set, so %s; listen on 127.0.0.1, set --tokens-file (see SECURITY.md), or pass --insecure",
				l.flag, l.addr, l.why)
		case l.flag == "--listen" && !tlsOn:
			return fmt.Errorf("refusing %s %s without --tls-cert: bearer tokens would cross the network in cleartext; set --tls-cert/--tls-key, or pass --insecure when a mesh encrypts the traffic",
				l.flag, l.addr)
		}
	}
	return nil
}
