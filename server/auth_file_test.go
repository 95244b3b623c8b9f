package server

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestParseTokens: what a tokens file may hold, and the message naming
// the identity and the mistake for what it may not.
func TestParseTokens(t *testing.T) {
	h1, h2 := HashToken("token-number-one-xxxx"), HashToken("token-number-two-xxxx")
	good := `
identities:
  - name: gw-east
    roles: [gateway]
    token_sha256: [` + h1 + `, ` + strings.ToUpper(h2) + `]
  - name: chat-a
    roles: instance
    cert: [dns:Chat-A.Fleet.Test, "ip:127.0.0.1", cn:chat-a]
    bind: {pool: chat, deployment: a, instance_id: a-1}
  - name: ops
    roles: [operator, operator-read]
    cert: uri:spiffe://fleet/ops
`
	tab, err := parseTokens([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if len(tab.identities) != 3 || len(tab.tokens) != 2 || len(tab.certs) != 4 {
		t.Fatalf("identities %d tokens %d certs %d", len(tab.identities), len(tab.tokens), len(tab.certs))
	}
	if id := tab.byToken("token-number-two-xxxx"); id == nil || id.Name != "gw-east" || !id.may(RoleGateway) || id.may(RoleInstance) {
		t.Errorf("second token: %+v", id)
	}
	if tab.byToken("token-number-three-x") != nil {
		t.Error("an unknown token matched")
	}
	if id := tab.certs["dns:chat-a.fleet.test"]; id == nil || *id.Bind != (Binding{"chat", "a", "a-1"}) {
		t.Errorf("DNS names are case-insensitive and the binding is kept: %+v", id)
	}
	if ops := tab.certs["uri:spiffe://fleet/ops"]; ops == nil || !ops.may(RoleOperator) || !ops.may(RoleOperatorRead) {
		t.Errorf("ops: %+v", ops)
	}
	if _, err := parseTokens(nil); err != nil {
		t.Errorf("an empty file (nobody allowed) is valid: %v", err)
	}

	bad := []struct{ name, file, want string }{
		{"unknown field", "identities:\n  - name: x\n    role: [gateway]\n", "field role not found"},
		{"no roles", "identities:\n  - name: x\n    token_sha256: " + h1 + "\n", `"x": no roles`},
		{"unknown role", "identities:\n  - name: x\n    roles: [admin]\n    token_sha256: " + h1 + "\n", `unknown role "admin"`},
		{"no credential", "identities:\n  - name: x\n    roles: [gateway]\n", "nothing can prove"},
		{"raw token", "identities:\n  - name: x\n    roles: [gateway]\n    token_sha256: hunter2hunter2\n", "never the token"},
		{"duplicate hash", "identities:\n  - {name: x, roles: gateway, token_sha256: " + h1 + "}\n  - {name: y, roles: gateway, token_sha256: " + h1 + "}\n", "also another identity's"},
		{"duplicate name", "identities:\n  - {name: x, roles: gateway, token_sha256: " + h1 + "}\n  - {name: x, roles: gateway, token_sha256: " + h2 + "}\n", "name used by another"},
		{"duplicate cert", "identities:\n  - {name: x, roles: gateway, cert: cn:a}\n  - {name: y, roles: gateway, cert: cn:a}\n", `also identity "x"'s`},
		{"bad cert kind", "identities:\n  - {name: x, roles: gateway, cert: 'spiffe:a'}\n", "is not dns, uri"},
		{"bad cert ip", "identities:\n  - {name: x, roles: gateway, cert: 'ip:10.0.0'}\n", "not an IP"},
		{"bind without instance", "identities:\n  - {name: x, roles: gateway, token_sha256: " + h1 + ", bind: {pool: p}}\n", "only for identities with role instance"},
		{"bind without pool", "identities:\n  - {name: x, roles: instance, token_sha256: " + h1 + ", bind: {deployment: a}}\n", "bind needs a pool"},
		{"bad name", "identities:\n  - {name: 'x y', roles: gateway, token_sha256: " + h1 + "}\n", "use letters"},
		{"not yaml", "identities: [", "yaml"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseTokens([]byte(tc.file))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// TestTokensFileChecks: the daemon refuses a missing or world-writable
// tokens file at start.
func TestTokensFileChecks(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tokens.yaml")
	if err := os.WriteFile(path, []byte("identities: []\n"), 0o666); err != nil {
		t.Fatal(err)
	}
	os.Chmod(path, 0o666)
	for _, tc := range []struct{ path, want string }{{path, "world-writable"}, {dir + "/missing.yaml", "no such file"}} {
		_, err := Start(DaemonConfig{Listen: "127.0.0.1:0", HTTPListen: "off", TokensFile: tc.path, Server: Options{DataDir: t.TempDir()}})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Start with %s: %v, want %q", tc.path, err, tc.want)
		}
	}
}

// TestTokensFileReload: an identity added to the tokens file can call
// within the reload interval, a removed one no longer can, and a broken
// edit keeps the file in force.
func TestTokensFileReload(t *testing.T) {
	e := startSecure(t, nil)
	cc := e.dial("")
	if err := authCalls["ListPools"](e.as("reader"), cc); err != nil {
		t.Fatal(err)
	}
	e.token["late"] = testToken("late")
	writeTestFile(t, e.tokensPath, []byte("identities:\n  - {name: late, roles: operator-read, token_sha256: "+HashToken(testToken("late"))+"}\n"))
	waitFor(t, "the new identity", func() bool { return authCalls["ListPools"](e.as("late"), cc) == nil })
	if err := authCalls["ListPools"](e.as("reader"), cc); status.Code(err) != codes.Unauthenticated {
		t.Errorf("removed identity: %v, want Unauthenticated", err)
	}
	writeTestFile(t, e.tokensPath, []byte("identities: [\n"))
	time.Sleep(5 * e.files.ReloadInterval)
	if err := authCalls["ListPools"](e.as("late"), cc); err != nil {
		t.Errorf("after a broken edit the file in force still applies: %v", err)
	}
}
