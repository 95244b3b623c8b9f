package console_test

import (
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prefixroute/prefixroute/daemon"
	"github.com/prefixroute/prefixroute/frontend/console"
	"github.com/prefixroute/prefixroute/internal/servertest"
	"github.com/prefixroute/prefixroute/internal/testpki"
)

// TestConsoleClientCertificate: over TLS with a client CA, a verified
// client certificate authenticates the console's requests as it does gRPC
// calls: alice (operator) reads and writes, a certificate of no identity is
// refused, and no credentials at all is 401.
func TestConsoleClientCertificate(t *testing.T) {
	pki := testpki.New(t)
	sc := servertest.Start(t, servertest.Config(func(c *daemon.Config) { c.TokensFile, c.TLS = pki.Files(true) }))
	get := func(cert string, method, path, body string) (int, string) {
		t.Helper()
		cfg := &tls.Config{RootCAs: pki.CA.Pool(), MinVersion: tls.VersionTLS12}
		if cert != "" {
			cfg.Certificates = []tls.Certificate{pki.Cert[cert].TLS}
		}
		c := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}}
		defer c.CloseIdleConnections()
		req, err := http.NewRequest(method, "https://"+sc.HTTPAddr()+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if method == http.MethodPost {
			req.Header.Set(console.HeaderName, "1")
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		if resp.StatusCode >= 400 {
			var e struct{ Error string }
			if err := json.Unmarshal(raw, &e); err != nil {
				t.Fatalf("error body %q is not JSON: %v", raw, err)
			}
			return resp.StatusCode, e.Error
		}
		return resp.StatusCode, string(raw)
	}
	for _, c := range []struct {
		name, cert, method, path, body string
		status                         int
		want                           string
	}{
		{"no credentials", "", "GET", "/ui/api/pools", "", 401, "no credentials"},
		{"alice reads", "alice", "GET", "/ui/api/pools", "", 200, `"pools"`},
		{"alice writes", "alice", "POST", "/ui/api/weights", `{"pool":"chat","weights":{"a":1},"allow_new_pool":true}`, 200, `"version":"1"`},
		{"a certificate of no identity", "stranger", "GET", "/ui/api/pools", "", 403, "stranger"},
		{"an instance's certificate", "inst-b-cert", "GET", "/ui/api/pools", "", 403, "needs role operator-read"},
	} {
		t.Run(c.name, func(t *testing.T) {
			status, got := get(c.cert, c.method, c.path, c.body)
			if status != c.status || !strings.Contains(got, c.want) {
				t.Errorf("%d %q; want %d saying %q", status, got, c.status, c.want)
			}
		})
	}
	// The audit log names the identity, as for a gRPC SetWeights.
	audit, err := os.ReadFile(filepath.Join(sc.Dir, "audit.log"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(audit), "alice via cert from 127.0.0.1:") {
		t.Errorf("audit.log does not name alice via cert: %s", audit)
	}
}
