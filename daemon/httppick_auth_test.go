package daemon

import (
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/prefixroute/prefixroute/frontend/httproute"
	"github.com/prefixroute/prefixroute/internal/auth"
)

// httpsClient trusts the test server CA and presents the named client
// certificate ("" for none).
func (e *secureEnv) httpsClient(certName string) *http.Client {
	e.t.Helper()
	cfg := &tls.Config{RootCAs: e.CA.Pool(), ServerName: "localhost"}
	if certName != "" {
		c := e.Cert[certName]
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &c.TLS, nil }
	}
	tr := &http.Transport{TLSClientConfig: cfg}
	e.t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// TestHTTPPickAuthorization: /v1/pick and /v1/route authorize as a gRPC Pick
// does, by bearer token or verified client certificate, over the HTTP
// listener's TLS; /v1/pick answers the gRPC code's status, /v1/route 401
// unauthenticated or 403 permission_denied in its reason header.
func TestHTTPPickAuthorization(t *testing.T) {
	e := startSecure(t, nil)
	for _, tc := range []struct {
		name, token, cert string
		status            int
		reason, msg       string
	}{
		{"no credentials", "", "", 401, "unauthenticated", "no credentials"},
		{"unknown token", "nope-nope-nope-nope", "", 401, "unauthenticated", "bearer token not recognised"},
		{"gateway token", "gw", "", 404, "unknown_pool", `pool not found: "nope"`}, // authorized: the pick fails
		{"reader token", "reader", "", 403, "permission_denied", `identity "reader" (token) has role operator-read`},
		{"operator certificate", "", "alice", 403, "permission_denied", `identity "alice" (cert) has role operator`},
		{"certificate of no identity", "", "stranger", 403, "permission_denied", "maps to no identity"},
	} {
		for _, path := range []string{httproute.PathPick, httproute.PathRoute} {
			t.Run(tc.name+" "+path, func(t *testing.T) {
				body := `{"pool":"nope"}`
				if path == httproute.PathRoute {
					body = `{"model":"nope","prompt":"hi"}`
				}
				req, _ := http.NewRequest(http.MethodPost, "https://"+e.d.HTTPAddr()+path, strings.NewReader(body))
				req.Header.Set(httproute.OriginalURIHeader, "/v1/completions")
				if tc.token != "" {
					tok, ok := e.Token[tc.token]
					if !ok {
						tok = tc.token
					}
					req.Header.Set("Authorization", "Bearer "+tok)
				}
				resp, err := e.httpsClient(tc.cert).Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				var st struct {
					Message string
					Error   struct{ Message string }
				}
				if err := json.Unmarshal(b, &st); err != nil {
					t.Fatalf("error body %q is not JSON: %v", b, err)
				}
				msg, reason := st.Message, ""
				if path == httproute.PathRoute {
					msg, reason = st.Error.Message, tc.reason
				}
				if resp.StatusCode != tc.status || !strings.Contains(msg, tc.msg) || resp.Header.Get("x-prefixroute-reason") != reason {
					t.Fatalf("status %d %v %s, want %d %q mentioning %q", resp.StatusCode, resp.Header, b, tc.status, reason, tc.msg)
				}
			})
		}
	}
}

// TestPickRefusal: with authentication on and TLS off, the HTTP Pick front
// ends are served on a loopback --http-listen only, unless --insecure.
func TestPickRefusal(t *testing.T) {
	for _, tc := range []struct {
		listen              string
		auth, tls, insecure bool
		refused             bool
	}{
		{"127.0.0.1:9090", true, false, false, false},
		{"[::1]:9090", true, false, false, false},
		{"0.0.0.0:9090", true, false, false, true},
		{":9090", true, false, false, true},
		{"10.0.0.5:9090", true, false, false, true},
		{"0.0.0.0:9090", true, true, false, false},
		{"0.0.0.0:9090", true, false, true, false},
		{"0.0.0.0:9090", false, false, true, false}, // no auth: checkExposure's --insecure
	} {
		cfg := &Config{HTTPListen: tc.listen, Insecure: tc.insecure}
		if tc.auth {
			cfg.TokensFile = "t"
		}
		if tc.tls {
			cfg.TLS = auth.TLSFiles{CertFile: "c", KeyFile: "k"}
		}
		got := tokenRefusal(cfg)
		if (got != "") != tc.refused {
			t.Errorf("%+v: refusal %q, want refused %v", tc, got, tc.refused)
		}
		if got != "" && !strings.Contains(got, "--http-listen "+tc.listen) {
			t.Errorf("refusal %q does not name the listener", got)
		}
	}
}
