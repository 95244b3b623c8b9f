package auth

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
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
	if id := tab.byToken("token-number-two-xxxx"); id == nil || id.Name != "gw-east" || !id.Has(RoleGateway) || id.Has(RoleInstance) {
		t.Errorf("second token: %+v", id)
	}
	if tab.byToken("token-number-three-x") != nil {
		t.Error("an unknown token matched")
	}
	if id := tab.certs["dns:chat-a.fleet.test"]; id == nil || *id.Bind != (Binding{"chat", "a", "a-1"}) {
		t.Errorf("DNS names are case-insensitive and the binding is kept: %+v", id)
	}
	if ops := tab.certs["uri:spiffe://fleet/ops"]; ops == nil || !ops.Has(RoleOperator) || !ops.Has(RoleOperatorRead) {
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
		{"empty name", "identities:\n  - {name: '', roles: gateway, token_sha256: " + h1 + "}\n", "1 to 128 bytes"},
		{"long name", "identities:\n  - {name: " + strings.Repeat("n", 129) + ", roles: gateway, token_sha256: " + h1 + "}\n", "1 to 128 bytes"},
		{"cert two identities", "identities:\n  - {name: x, roles: gateway, cert: ['dns:A.test', 'dns:a.test']}\n", `also identity "x"'s`},
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

// TestParseTokensNameEdge: a name of exactly 128 bytes of the allowed
// characters is valid.
func TestParseTokensNameEdge(t *testing.T) {
	name := strings.Repeat("a._@:/+-", 16)
	tab, err := parseTokens([]byte("identities:\n  - {name: '" + name + "', roles: gateway, cert: cn:x}\n"))
	if err != nil || len(tab.identities) != 1 || tab.identities[0].Name != name {
		t.Fatalf("128-byte name: %v", err)
	}
}

// TestLoadTokensFile: the file must exist, not be world-writable, and hold
// at most maxTokensFileBytes; every error names the file.
func TestLoadTokensFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, b []byte, mode os.FileMode) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, b, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, mode); err != nil { // past the umask
			t.Fatal(err)
		}
		return path
	}
	pad := func(n int) []byte { // a valid file of exactly n bytes
		b := []byte("identities: []\n#")
		return append(b, strings.Repeat("x", n-len(b))...)
	}
	// The edge, at a small limit (parsing 16 MiB takes seconds under -race).
	if _, err := loadTokensFileMax(write("max.yaml", pad(100), 0o600), 100); err != nil {
		t.Errorf("a file of exactly the limit: %v", err)
	}
	if _, err := loadTokensFileMax(write("max1.yaml", pad(101), 0o600), 100); err == nil || !strings.Contains(err.Error(), "max1.yaml is over 100 bytes") {
		t.Errorf("a file one byte over the limit: %v", err)
	}
	// The limit in force, refused before parsing.
	for _, tc := range []struct{ name, path, want string }{
		{"over the size limit", write("big.yaml", pad(maxTokensFileBytes+1), 0o600), "big.yaml is over 16777216 bytes"},
		{"world-writable", write("ww.yaml", []byte("identities: []\n"), 0o666), "ww.yaml is world-writable (mode -rw-rw-rw-)"},
		{"missing", filepath.Join(dir, "missing.yaml"), "tokens file: open " + filepath.Join(dir, "missing.yaml") + ": no such file"},
		{"bad entry", write("bad.yaml", []byte("identities:\n  - {name: x, roles: admin, cert: cn:x}\n"), 0o640),
			`bad.yaml: identities[0] "x": unknown role "admin"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := loadTokensFile(tc.path); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// TestHashToken: the lowercase hex SHA-256 ("abc" is FIPS 180-2's example).
func TestHashToken(t *testing.T) {
	if got, want := HashToken("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"; got != want {
		t.Fatalf("HashToken(abc) = %s, want %s", got, want)
	}
}
