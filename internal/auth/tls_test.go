package auth_test

import (
	"crypto/tls"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prefixroute/prefixroute/internal/auth"
	"github.com/prefixroute/prefixroute/internal/testpki"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// servedSerial is the serial of the certificate a handshake on a listener
// with cfg would get, and the config's ALPN protocols.
func servedSerial(t *testing.T, cfg *tls.Config) (string, []string) {
	t.Helper()
	c, err := cfg.GetConfigForClient(&tls.ClientHelloInfo{})
	if err != nil {
		t.Fatal(err)
	}
	return c.Certificates[0].Leaf.SerialNumber.String(), c.NextProtos
}

// TestTLSServerReload rotates the server certificate on a fake clock: a
// certificate without its key is refused at the check (the old pair
// serves on), the key completes the rotation at the next check, for both
// listeners; the client CA is verified only when a client sends a
// certificate.
func TestTLSServerReload(t *testing.T) {
	p := testpki.New(t)
	s, err := auth.NewTLSServer(p.TLS, quiet)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1e9, 0)
	auth.SetTLSClock(s, func() time.Time { return now })
	check := func(what, serial string, want auth.ReloadStats) {
		t.Helper()
		got, protos := servedSerial(t, s.HTTPConfig())
		if got != serial || strings.Join(protos, ",") != "h2,http/1.1" {
			t.Errorf("%s: HTTP serves %s %q, want %s [h2 http/1.1]", what, got, protos, serial)
		}
		if st := s.ReloadStats(); st != want {
			t.Errorf("%s: stats %+v, want %+v", what, st, want)
		}
	}
	check("at start", p.Server.Serial, auth.ReloadStats{})
	next := p.CA.ServerLeaf(t)
	testpki.WriteFile(t, p.TLS.CertFile, next.CertPEM)
	check("before the check", p.Server.Serial, auth.ReloadStats{})
	now = now.Add(p.TLS.ReloadInterval)
	check("a certificate without its key", p.Server.Serial, auth.ReloadStats{Checks: 1, Failures: 1})
	testpki.WriteFile(t, p.TLS.KeyFile, next.KeyPEM)
	now = now.Add(p.TLS.ReloadInterval)
	check("with its key", next.Serial, auth.ReloadStats{Checks: 2, Reloads: 1, Failures: 1})

	grpcCfg := s.GRPCCredentials().Info()
	if grpcCfg.SecurityProtocol != "tls" {
		t.Errorf("gRPC credentials %+v, want tls", grpcCfg)
	}
	c, err := s.HTTPConfig().GetConfigForClient(&tls.ClientHelloInfo{})
	if err != nil {
		t.Fatal(err)
	}
	if c.ClientAuth != tls.VerifyClientCertIfGiven || c.ClientCAs == nil || c.MinVersion != tls.VersionTLS12 {
		t.Errorf("client auth %v, CAs %v, min version %x", c.ClientAuth, c.ClientCAs != nil, c.MinVersion)
	}
}

// TestTLSFilesErrors: a partial configuration names the flags; files that
// cannot be loaded name the file.
func TestTLSFilesErrors(t *testing.T) {
	p := testpki.New(t)
	good := p.TLS
	missing := filepath.Join(p.Dir, "nope.pem")
	tests := []struct {
		name string
		f    auth.TLSFiles
		want string
	}{
		{"nothing", auth.TLSFiles{}, "TLS needs --tls-cert and --tls-key"},
		{"key without cert", auth.TLSFiles{KeyFile: good.KeyFile}, "--tls-cert and --tls-key go together"},
		{"cert without key", auth.TLSFiles{CertFile: good.CertFile}, "--tls-cert and --tls-key go together"},
		{"client CA alone", auth.TLSFiles{ClientCAFile: good.ClientCAFile}, "--tls-client-ca needs --tls-cert and --tls-key"},
		{"missing cert file", auth.TLSFiles{CertFile: missing, KeyFile: good.KeyFile}, "--tls-cert " + missing + " / --tls-key " + good.KeyFile},
		{"key of another cert", auth.TLSFiles{CertFile: good.CertFile, KeyFile: p.AliceKey}, "private key does not match public key"},
		{"missing client CA", auth.TLSFiles{CertFile: good.CertFile, KeyFile: good.KeyFile, ClientCAFile: missing}, "--tls-client-ca: open " + missing},
		{"client CA not PEM", auth.TLSFiles{CertFile: good.CertFile, KeyFile: good.KeyFile, ClientCAFile: good.KeyFile},
			"--tls-client-ca " + good.KeyFile + ": no PEM certificate in it"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := auth.NewTLSServer(tc.f, quiet)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
	if err := (auth.TLSFiles{}).Check(); err != nil {
		t.Errorf("no TLS at all is a valid configuration: %v", err)
	}
}
