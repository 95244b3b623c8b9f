package daemon

import (
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/prefixroute/prefixroute/frontend/console"
	"github.com/prefixroute/prefixroute/frontend/httproute"
	"github.com/prefixroute/prefixroute/internal/auth"
)

// TestCleartextTokenPaths: with a tokens file, no TLS and a non-loopback
// --http-listen, no path of the HTTP listener takes a bearer token: the
// pickers and the console's API answer 403 (even to an operator's valid
// token), while the page, the probes and /metrics, which take none, are
// served.
func TestCleartextTokenPaths(t *testing.T) {
	e := startSecure(t, func(c *Config) { c.TLS, c.HTTPListen = auth.TLSFiles{}, "0.0.0.0:0" })
	_, port, _ := net.SplitHostPort(e.d.HTTPAddr())
	base := "http://127.0.0.1:" + port
	for _, tc := range []struct {
		method, path, token, body string
		status                    int
	}{
		{"POST", "/ui/api/weights", "ops", `{"pool":"p","weights":{"a":1}}`, 403},
		{"GET", "/ui/api/pools", "reader", "", 403},
		{"POST", "/ui/api/explain", "gw", `{"pool":"p"}`, 403},
		{"POST", httproute.PathPick, "gw", `{"pool":"p"}`, 403},
		{"GET", "/ui/", "", "", 200},
		{"GET", "/healthz", "", "", 200},
	} {
		req, _ := http.NewRequest(tc.method, base+tc.path, strings.NewReader(tc.body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(console.HeaderName, "1")
		if tc.token != "" {
			req.Header.Set("Authorization", "Bearer "+e.Token[tc.token])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status || (tc.status == 403 && !strings.Contains(string(b), "cleartext")) {
			t.Errorf("%s %s: %d %s, want %d (cleartext refusal)", tc.method, tc.path, resp.StatusCode, b, tc.status)
		}
	}
}
