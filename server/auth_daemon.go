package server

import (
	"errors"
	"fmt"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/auth"
	"github.com/prefixroute/prefixroute/internal/netaddr"
	"go.opentelemetry.io/otel/metric"
)

// startSecurity loads the tokens file and the TLS files and sets up the
// stream limits, for Start.
func (d *Daemon) startSecurity(cfg *DaemonConfig, meter metric.Meter) error {
	var err error
	if cfg.TokensFile != "" {
		path := cfg.TokensFile
		if d.auth, err = newReloader("tokens file", []string{path}, cfg.TLS.ReloadInterval, d.log,
			func() (*authTable, error) { return loadTokensFile(path) }); err != nil {
			return err
		}
	}
	if d.tls, err = newTLSServer(cfg.TLS, d.log); err != nil {
		return err
	}
	if cfg.TLS.ClientCAFile != "" && d.auth == nil {
		return errors.New("--tls-client-ca needs --tokens-file, which maps client certificates to roles")
	}
	if cfg.Insecure && (d.auth == nil || d.tls == nil) {
		d.log.Warn("--insecure: listeners may be reachable without authentication or TLS; see SECURITY.md",
			"auth", d.auth != nil, "tls", d.tls != nil)
	}
	d.guard, err = newStreamGuard(cfg.Transport, meter)
	return err
}

// authFunc is the auth interceptors' function, or nil when authentication
// is off.
func (d *Daemon) authFunc() auth.AuthFunc {
	if d.auth == nil {
		return nil
	}
	a := &authenticator{table: d.auth.get}
	return a.authFunc
}

// checkExposure enforces the safe default: without a tokens file (no
// authentication) both listeners stay on loopback, and bearer tokens never
// cross a network in cleartext, unless insecure is set. The error is one
// line saying why and what to do.
func checkExposure(cfg *DaemonConfig) error {
	if cfg.Insecure {
		return nil
	}
	auth, tlsOn := cfg.TokensFile != "", cfg.TLS.enabled()
	for _, l := range []struct{ flag, addr string }{{"--listen", cfg.Listen}, {"--http-listen", cfg.HTTPListen}} {
		if l.addr == "off" || netaddr.IsLoopback(l.addr) {
			continue
		}
		switch {
		case !auth:
			return fmt.Errorf("refusing %s %s: no --tokens-file is set, so anyone who can reach it could steer traffic (SetWeights, forged load reports); listen on 127.0.0.1, set --tokens-file (see SECURITY.md), or pass --insecure",
				l.flag, l.addr)
		case l.flag == "--listen" && !tlsOn:
			return fmt.Errorf("refusing %s %s without --tls-cert: bearer tokens would cross the network in cleartext; set --tls-cert/--tls-key, or pass --insecure when a mesh encrypts the traffic",
				l.flag, l.addr)
		}
	}
	return nil
}
