package daemon

import (
	"context"
	"errors"
	"fmt"

	grpcauth "github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/auth"
	"go.opentelemetry.io/otel/metric"
	"google.golang.org/grpc"

	"github.com/prefixroute/prefixroute/frontend"
	"github.com/prefixroute/prefixroute/frontend/httproute"
	"github.com/prefixroute/prefixroute/internal/auth"
	"github.com/prefixroute/prefixroute/internal/netaddr"
	"github.com/prefixroute/prefixroute/server"
)

// startSecurity loads the tokens file and the TLS files and sets up the
// stream limits, for Start.
func (d *Daemon) startSecurity(cfg *Config, meter metric.Meter) error {
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
	return d.srv.LimitReports(server.ReportLimits{MaxStreams: t.MaxReportStreams, PerSecond: t.ReportsPerSecond,
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

// listener is one of the daemon's listeners as the exposure rule sees it.
type listener struct {
	flag, addr string // "--listen" and its address ("" or "off": not there)
	// why is what anyone who can reach it could do without a tokens file.
	why string
	// tls reports whether it is served over TLS; tlsHow says how to turn
	// its TLS on.
	tls    bool
	tlsHow string
}

// Errors of the exposure rule, by what the listener lacks.
var (
	errNoTokens  = errors.New("no tokens file")
	errCleartext = errors.New("no TLS")
)

// exposure is the one rule of every listener that changes or reads
// routing: off loopback it needs the tokens file (authentication), and
// TLS (bearer tokens must not cross a network in cleartext), unless
// insecure (--insecure: a mesh encrypts and authenticates). The error,
// errNoTokens or errCleartext wrapped in one line saying why and what to
// do, is nil for a listener on loopback or not there. The metrics
// listener is never asked: it serves only /healthz, /readyz and /metrics,
// which change nothing, so it may listen anywhere.
func exposure(l listener, authOn, insecure bool) error {
	if insecure || l.addr == "" || l.addr == "off" || netaddr.IsLoopback(l.addr) {
		return nil
	}
	if !authOn {
		return &refusal{lack: errNoTokens, msg: fmt.Sprintf("refusing %s %s: no --tokens-file is set, so %s; listen on 127.0.0.1, set --tokens-file (see SECURITY.md), or pass --insecure",
			l.flag, l.addr, l.why)}
	}
	if !l.tls {
		return &refusal{lack: errCleartext, msg: fmt.Sprintf("refusing %s %s without TLS: bearer tokens would cross the network in cleartext; %s, or pass --insecure when a mesh encrypts the traffic",
			l.flag, l.addr, l.tlsHow)}
	}
	return nil
}

// refusal is exposure's error: its message, and what the listener lacks.
type refusal struct {
	msg  string
	lack error // errNoTokens or errCleartext
}

func (r *refusal) Error() string { return r.msg }
func (r *refusal) Unwrap() error { return r.lack }

// listeners are the daemon's listeners that the exposure rule covers: the
// gRPC one, the HTTP one, and every gRPC front end's.
func listeners(cfg *Config) []listener {
	tlsOn := cfg.TLS.Enabled()
	ls := []listener{
		{flag: "--listen", addr: cfg.Listen, tls: tlsOn, tlsHow: "set --tls-cert/--tls-key",
			why: "anyone who can reach it could steer traffic (SetWeights, forged load reports)"},
		{flag: "--http-listen", addr: cfg.HTTPListen, tls: tlsOn, tlsHow: "listen on loopback, set --tls-cert/--tls-key",
			why: "anyone who can reach it could read and steer routing (the HTTP pick and route endpoints, the console); for probes and /metrics alone use --metrics-listen, which may listen anywhere"},
	}
	for _, f := range cfg.FrontEnds {
		ls = append(ls, listener{flag: "--" + f.Name + "-listen", addr: f.Listen,
			tls:    f.TLS == frontend.TLSSelfSigned || (f.TLS == frontend.TLSDaemon && tlsOn),
			tlsHow: "set --tls-cert/--tls-key or --" + f.Name + "-tls=self-signed",
			why:    "anyone who can reach it could steer traffic"})
	}
	return ls
}

// checkExposure applies exposure to every listener, for Start. The HTTP
// listener without TLS is the one exception that still starts: it serves
// the probes, /metrics and the console's page, and refuses every path that
// takes a bearer token (tokenRefusal).
func checkExposure(cfg *Config) error {
	for _, l := range listeners(cfg) {
		err := exposure(l, cfg.TokensFile != "", cfg.Insecure)
		if err != nil && !(l.flag == "--http-listen" && errors.Is(err, errCleartext)) {
			return err
		}
	}
	return nil
}

// tokenRefusal is why the HTTP listener's token-bearing paths (/v1/pick,
// /v1/route and the console's /ui/api/) are not served, or "" when they
// are: the exposure rule's refusal of the HTTP listener without TLS, so
// that no bearer token is taken in cleartext off loopback.
func tokenRefusal(cfg *Config) string {
	if err := exposure(listeners(cfg)[1], cfg.TokensFile != "", cfg.Insecure); errors.Is(err, errCleartext) {
		return fmt.Sprintf("%s, %s, %s and the console's API (/ui/api/) are not served: %v", httproute.PathPick, httproute.PathRoute, httproute.PathOutcome, err)
	}
	return ""
}
