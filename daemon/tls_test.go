package daemon

import (
	"crypto/tls"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prefixroute/prefixroute/internal/auth"
	"github.com/prefixroute/prefixroute/internal/testpki"
	"github.com/prefixroute/prefixroute/internal/testwait"
	"github.com/prefixroute/prefixroute/server"
)

// serialOf handshakes with addr and returns the server certificate's
// serial number.
func serialOf(t *testing.T, addr string, ca *testpki.CA) string {
	t.Helper()
	c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost", NextProtos: []string{"h2"}})
	if err != nil {
		t.Fatalf("handshake with %s: %v", addr, err)
	}
	defer func() { _ = c.Close() }() // a handshake only: nothing written to lose
	return c.ConnectionState().PeerCertificates[0].SerialNumber.String()
}

// TestCertificateReload rotates the server certificate on disk: new
// handshakes on both listeners get the new one without a restart; a
// half-written rotation (a certificate without its key), once a check has
// refused it, keeps the old one serving until the key arrives.
func TestCertificateReload(t *testing.T) {
	e := startSecure(t, nil)
	first := e.Server.Serial
	if got := serialOf(t, e.d.Addr(), e.CA); got != first {
		t.Fatalf("gRPC serves serial %s, want %s", got, first)
	}
	next := e.CA.ServerLeaf(t)
	_, before := e.reloadStats()
	testpki.WriteFile(t, e.files.CertFile, next.CertPEM) // the key still is the old one
	testwait.Eventually(t, "a check to refuse the certificate without its key", func() bool {
		serialOf(t, e.d.Addr(), e.CA) // handshakes are what trigger a check
		_, now := e.reloadStats()
		return now.Failures > before.Failures
	})
	if got := serialOf(t, e.d.Addr(), e.CA); got != first {
		t.Fatalf("after a certificate without its key: serial %s, want the old %s", got, first)
	}
	testpki.WriteFile(t, e.files.KeyFile, next.KeyPEM)
	testwait.Eventually(t, "the new certificate", func() bool { return serialOf(t, e.d.Addr(), e.CA) == next.Serial })
	if got := serialOf(t, e.d.HTTPAddr(), e.CA); got != next.Serial {
		t.Errorf("HTTP listener serves serial %s, want %s", got, next.Serial)
	}
	// Calls keep working on a connection made after the rotation.
	if err := authCalls["GetWeights"](e.as("ops"), e.dial("")); err != nil && !strings.Contains(err.Error(), "not found") {
		t.Errorf("GetWeights after rotation: %v", err)
	}
}

// TestHTTPListenerTLS: /healthz and /metrics are served over TLS with the
// same certificate; plaintext HTTP is refused.
func TestHTTPListenerTLS(t *testing.T) {
	e := startSecure(t, nil)
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: e.CA.Pool(), ServerName: "localhost"}}}
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		resp, err := c.Get("https://" + e.d.HTTPAddr() + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s: %s", path, resp.Status)
		}
	}
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + e.d.HTTPAddr() + "/healthz")
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("plaintext GET: %s, want an error or 400", resp.Status)
		}
	}
}

// TestTLSConfigErrors: a partial or broken TLS configuration stops Start
// with a message naming the flag.
func TestTLSConfigErrors(t *testing.T) {
	p := testpki.New(t)
	dir, good := p.Dir, p.TLS
	tests := []struct {
		name string
		f    auth.TLSFiles
		want string
	}{
		{"key without cert", auth.TLSFiles{KeyFile: good.KeyFile}, "--tls-cert and --tls-key go together"},
		{"cert without key", auth.TLSFiles{CertFile: good.CertFile}, "--tls-cert and --tls-key go together"},
		{"client CA alone", auth.TLSFiles{ClientCAFile: good.ClientCAFile}, "--tls-client-ca needs --tls-cert"},
		{"missing cert file", auth.TLSFiles{CertFile: dir + "/nope.pem", KeyFile: good.KeyFile}, "--tls-cert " + dir + "/nope.pem"},
		{"CA not PEM", auth.TLSFiles{CertFile: good.CertFile, KeyFile: good.KeyFile, ClientCAFile: good.KeyFile}, "no PEM certificate"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Start(Config{Listen: "127.0.0.1:0", HTTPListen: "off", TLS: tc.f, Server: server.Options{DataDir: t.TempDir()}})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Start: %v, want an error containing %q", err, tc.want)
			}
		})
	}
	_, err := Start(Config{Listen: "127.0.0.1:0", HTTPListen: "off", TLS: good, Server: server.Options{DataDir: t.TempDir()}})
	if err == nil || !strings.Contains(err.Error(), "--tls-client-ca needs --tokens-file") {
		t.Fatalf("client CA without tokens file: %v", err)
	}
}
