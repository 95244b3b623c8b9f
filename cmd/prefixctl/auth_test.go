package main

import (
	"context"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prefixroute/prefixroute/daemon"
	"github.com/prefixroute/prefixroute/internal/testpki"
	"github.com/prefixroute/prefixroute/server"
)

// startSecureDaemon runs a real sidecar on loopback with the tokens file
// and, with withTLS, TLS and the client CA of p; its clock stands still.
func startSecureDaemon(t *testing.T, p *testpki.PKI, withTLS bool) *daemon.Daemon {
	t.Helper()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	cfg := daemon.Config{Listen: "127.0.0.1:0", HTTPListen: "off", Server: server.Options{DataDir: t.TempDir(),
		Now: func() time.Time { return at }, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}}
	cfg.TokensFile, cfg.TLS = p.Files(withTLS)
	d, err := daemon.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := d.Shutdown(ctx); err != nil {
			t.Errorf("daemon Shutdown: %v", err)
		}
	})
	return d
}

// TestAuthTLS drives prefixctl against a sidecar with a tokens file, TLS and
// a client CA: the right token works, no token, an unknown token and the
// wrong role exit 1 with a line that says what to do.
func TestAuthTLS(t *testing.T) {
	p := testpki.New(t)
	d := startSecureDaemon(t, p, true)
	addr := d.Addr()
	tlsArgs := []string{"--tls-ca", p.ServerCA}
	as := func(who string, args ...string) result {
		a := append([]string(nil), tlsArgs...)
		if who != "" {
			a = append(a, "--token-file", p.TokenFile[who])
		}
		return ctl(addr, append(a, args...)...)
	}

	expect(t, as("ops", "weights", "set", "chat", "a=1", "b=3", "--create"), 0, "weights set, version 1", "75%")
	expect(t, as("ops", "weights", "get", "chat"), 0, "weights version 1")
	expect(t, as("reader", "weights", "get", "chat"), 0, "weights version 1")

	expect(t, as("", "weights", "get", "chat"), exitRefused,
		"prefixctl: weights get: Unauthenticated: no credentials",
		"(pass --token-file with an operator-read token, or --tls-cert/--tls-key with a client certificate)")
	expect(t, as("", "weights", "set", "chat", "a=1"), exitRefused, "Unauthenticated", "pass --token-file with an operator token")
	expect(t, as("reader", "weights", "set", "chat", "a=1"), exitRefused,
		"prefixctl: weights set: PermissionDenied: identity \"reader\" (token) has role operator-read",
		"needs role operator", "('prefixctl weights set' needs role operator; use --token-file with a token of that role)")
	expect(t, as("gw", "policy", "get", "chat"), exitRefused, "PermissionDenied", "needs role operator-read")
	expect(t, as("reader", "weights", "get", "chat"), 0) // nothing changed
	expect(t, ctl(addr, "--token-file", p.TokenFile["ops"], "pools"), exitUnreachable, "if it serves TLS, pass --tls-ca")

	// An unknown token: the hint names the file, never the token.
	bogus := p.Dir + "/bogus.token"
	writeFile(t, bogus, "not-a-known-token\n")
	r := ctl(addr, "--tls-ca", p.ServerCA, "--token-file", bogus, "pools")
	expect(t, r, exitRefused, "Unauthenticated", "does not know the token in --token-file "+bogus, "operator-read")
	if strings.Contains(r.stderr, "not-a-known-token\n") || strings.Contains(r.stderr, "Bearer not-a") {
		t.Errorf("the token is in the output: %q", r.stderr)
	}

	// Mutual TLS: alice's certificate proves an operator.
	expect(t, ctl(addr, "--tls-ca", p.ServerCA, "--tls-cert", p.AliceCert, "--tls-key", p.AliceKey, "weights", "set", "chat", "a=1"),
		0, "version 2")

	// The environment stands in for the flags.
	t.Setenv("PREFIXCTL_TOKEN_FILE", p.TokenFile["reader"])
	t.Setenv("PREFIXCTL_TLS_CA", p.ServerCA)
	t.Setenv("PREFIXCTL_TLS_SERVER_NAME", "localhost")
	expect(t, ctl(addr, "weights", "get", "chat"), 0, "weights version 2")
	expect(t, ctl(addr, "--token-file", p.TokenFile["ops"], "weights", "set", "chat", "a=2"), 0, "version 3")
}

// TestAuthInstanceRunAndPick: instance run reports with an instance token
// bound to chat/a, and pick with a gateway token picks it; outside the
// binding, instance run exits 1 naming it.
func TestAuthInstanceRunAndPick(t *testing.T) {
	p := testpki.New(t)
	d := startSecureDaemon(t, p, true)
	addr := d.Addr()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan result, 1)
	go func() {
		var out, errb strings.Builder
		code := runContext(ctx, []string{"--addr", addr, "--tls-ca", p.ServerCA, "--token-file", p.TokenFile["inst-a"],
			"instance", "run", "chat", "a", "a-1", "--address", "10.0.0.1:8000"}, &out, &errb)
		done <- result{code, out.String(), errb.String()}
	}()
	ops := []string{"--tls-ca", p.ServerCA, "--token-file", p.TokenFile["ops"]}
	expect(t, ctl(addr, append(ops, "instances", "chat", "--wait", "1", "--wait-timeout", "20s")...), 0, "a-1", "10.0.0.1:8000")
	expect(t, ctl(addr, "--tls-ca", p.ServerCA, "--token-file", p.TokenFile["gw"], "pick", "chat", "--tokens", "0-63"), 0, "picked a-1")
	expect(t, ctl(addr, append(ops, "pick", "chat", "--tokens", "0-63")...), exitRefused,
		"PermissionDenied", "'prefixctl pick' needs role gateway")
	cancel()
	if r := <-done; r.code != 0 || !strings.Contains(r.stdout, "instance a-1 stopped") {
		t.Errorf("instance run: %v", r)
	}

	r := ctl(addr, "--tls-ca", p.ServerCA, "--token-file", p.TokenFile["inst-a"],
		"instance", "run", "chat", "b", "b-1", "--address", "10.0.0.2:8000", "--for", "1s")
	expect(t, r, exitRefused, "PermissionDenied", `bound to pool "chat" deployment "a"`, "needs role instance")
}

// TestAuthPlaintext: a token needs TLS unless the sidecar is on loopback;
// on loopback a plaintext sidecar with a tokens file takes it.
func TestAuthPlaintext(t *testing.T) {
	p := testpki.New(t)
	d := startSecureDaemon(t, p, false)
	expect(t, ctl(d.Addr(), "--token-file", p.TokenFile["ops"], "weights", "set", "chat", "a=1", "--create"), 0, "version 1")
	expect(t, ctl(d.Addr(), "weights", "get", "chat"), exitRefused, "Unauthenticated", "pass --token-file")
	expect(t, ctl("10.255.255.1:50051", "--token-file", p.TokenFile["ops"], "pools"), exitUsage,
		"--token-file without TLS to 10.255.255.1:50051: the token would cross the network in cleartext")
	expect(t, ctl(d.Addr(), "--token-file", p.Dir+"/missing.token", "pools"), exitUsage, "--token-file: token file:")
	expect(t, ctl(d.Addr(), "--tls-cert", p.AliceCert, "pools"), exitUsage, "both its certificate and its key")
	// A TLS client against a plaintext sidecar cannot connect.
	expect(t, ctl(d.Addr(), "--tls-ca", p.ServerCA, "--timeout", "2s", "pools"), exitUnreachable)
}

func TestLocalAddr(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:50051": true, "127.1.2.3:1": true, "[::1]:1": true, "localhost:1": true, "LOCALHOST:1": true,
		"unix:///run/pr.sock": true, "passthrough:///127.0.0.1:1": true,
		"10.0.0.1:1": false, ":50051": false, "router:1": false, "dns:///localhost:1": false, "127.0.0.1": false,
	} {
		if got := localAddr(addr); got != want {
			t.Errorf("localAddr(%q) = %v, want %v", addr, got, want)
		}
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}
