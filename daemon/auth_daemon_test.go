package daemon

import (
	"net/http"
	"strings"
	"testing"

	"github.com/prefixroute/prefixroute/internal/auth"
	"github.com/prefixroute/prefixroute/server"
)

// TestCheckExposure: without a tokens file only loopback listeners start;
// with one, a non-loopback gRPC listener also needs TLS; --insecure lifts
// both. Each refusal is one line naming the flag and the way out.
func TestCheckExposure(t *testing.T) {
	tls := auth.TLSFiles{CertFile: "c.pem", KeyFile: "k.pem"}
	tests := []struct {
		name string
		cfg  Config
		want string // "" = allowed
	}{
		{"loopback v4", Config{Listen: "127.0.0.1:50051", HTTPListen: "127.0.0.1:9090"}, ""},
		{"loopback 127/8", Config{Listen: "127.1.2.3:50051", HTTPListen: "off"}, ""},
		{"loopback v6", Config{Listen: "[::1]:50051", HTTPListen: "localhost:9090"}, ""},
		{"all interfaces", Config{Listen: ":50051", HTTPListen: "off"}, "refusing --listen :50051: no --tokens-file"},
		{"wildcard", Config{Listen: "0.0.0.0:50051", HTTPListen: "off"}, "refusing --listen 0.0.0.0:50051"},
		{"v6 wildcard", Config{Listen: "[::]:50051", HTTPListen: "off"}, "refusing --listen [::]:50051"},
		{"host name", Config{Listen: "router.internal:50051", HTTPListen: "off"}, "refusing --listen"},
		{"http exposed", Config{Listen: "127.0.0.1:1", HTTPListen: "0.0.0.0:9090"}, "refusing --http-listen 0.0.0.0:9090: no --tokens-file is set, so anyone who can reach it could read and steer routing"},
		{"http exposed names --metrics-listen", Config{Listen: "127.0.0.1:1", HTTPListen: ":9090"}, "for probes and /metrics alone use --metrics-listen"},
		{"metrics exposed", Config{Listen: "127.0.0.1:1", HTTPListen: "127.0.0.1:2", MetricsListen: "0.0.0.0:9092"}, ""},
		{"metrics on all interfaces, http off", Config{Listen: "127.0.0.1:1", HTTPListen: "off", MetricsListen: ":9092"}, ""},
		{"metrics exposed, http too", Config{Listen: "127.0.0.1:1", HTTPListen: "0.0.0.0:2", MetricsListen: "0.0.0.0:9092"}, "refusing --http-listen 0.0.0.0:2"},
		{"metrics exposed, grpc too", Config{Listen: "0.0.0.0:1", HTTPListen: "off", MetricsListen: "0.0.0.0:9092"}, "refusing --listen 0.0.0.0:1"},
		{"insecure", Config{Listen: "0.0.0.0:1", HTTPListen: "0.0.0.0:2", Insecure: true}, ""},
		{"tokens without TLS", Config{Listen: "0.0.0.0:1", HTTPListen: "off", TokensFile: "t"}, "refusing --listen 0.0.0.0:1 without TLS: bearer tokens would cross"},
		{"tokens and TLS", Config{Listen: "0.0.0.0:1", HTTPListen: "0.0.0.0:2", TokensFile: "t", TLS: tls}, ""},
		{"tokens, plaintext metrics", Config{Listen: "127.0.0.1:1", HTTPListen: "0.0.0.0:2", TokensFile: "t"}, ""},
		{"TLS without tokens", Config{Listen: "0.0.0.0:1", HTTPListen: "off", TLS: tls}, "no --tokens-file"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := checkExposure(&tc.cfg)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			case err != nil && strings.Contains(err.Error(), "\n"):
				t.Errorf("message is more than one line: %q", err)
			}
		})
	}
}

// TestMetricsListener: the metrics listener serves /healthz, /readyz and
// /metrics and nothing else (the routes that checkExposure's exemption
// relies on); Start refuses an exposed HTTP listener before it binds
// anything, with the metrics listener set or not. (That a non-loopback
// metrics listener is allowed is TestCheckExposure's; the test itself
// listens on loopback only.)
func TestMetricsListener(t *testing.T) {
	_, err := Start(Config{Listen: "127.0.0.1:0", HTTPListen: "0.0.0.0:0", MetricsListen: "127.0.0.1:0", Server: server.Options{DataDir: t.TempDir()}})
	if err == nil || !strings.Contains(err.Error(), "refusing --http-listen 0.0.0.0:0") {
		t.Fatalf("HTTP listener on 0.0.0.0:0: %v, want refused", err)
	}
	d := obsStart(t, func(c *Config) { c.HTTPListen, c.MetricsListen = "off", "127.0.0.1:0" })
	if d.HTTPAddr() != "" || d.MetricsAddr() == "" {
		t.Fatalf("HTTP at %q, metrics at %q", d.HTTPAddr(), d.MetricsAddr())
	}
	base := "http://" + d.MetricsAddr()
	for _, p := range []struct {
		path string
		code int
		body string
	}{
		{"/healthz", http.StatusOK, "ok\n"},
		{"/readyz", http.StatusOK, "ready\n"},
		{"/metrics", http.StatusOK, "prefixroute_build_info"},
		{"/v1/pick", http.StatusNotFound, ""},
		{"/ui/", http.StatusNotFound, ""},
	} {
		if code, body := obsGet(t, base+p.path); code != p.code || !strings.Contains(body, p.body) {
			t.Errorf("GET %s: %d %.80q, want %d with %q", p.path, code, body, p.code, p.body)
		}
	}
}

// TestStartRefusesExposedListener: Start itself refuses, before it opens
// the data dir or a port.
func TestStartRefusesExposedListener(t *testing.T) {
	dir := t.TempDir()
	_, err := Start(Config{Listen: "0.0.0.0:0", HTTPListen: "off", Server: server.Options{DataDir: dir}})
	if err == nil || !strings.Contains(err.Error(), "--insecure") {
		t.Fatalf("Start: %v", err)
	}
}
