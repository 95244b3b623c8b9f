package daemon

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/prefixroute/prefixroute/internal/auth"
	"github.com/prefixroute/prefixroute/internal/testpki"
	"github.com/prefixroute/prefixroute/internal/testwait"
	"github.com/prefixroute/prefixroute/server"
)

// TestTokensFileChecks: the daemon refuses a missing or world-writable
// tokens file at start.
func TestTokensFileChecks(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tokens.yaml")
	if err := os.WriteFile(path, []byte("identities: []\n"), 0o666); err != nil {
		t.Fatal(err)
	}
	must(t, os.Chmod(path, 0o666)) // past the umask
	for _, tc := range []struct{ path, want string }{{path, "world-writable"}, {dir + "/missing.yaml", "no such file"}} {
		_, err := Start(Config{Listen: "127.0.0.1:0", HTTPListen: "off", TokensFile: tc.path, Server: server.Options{DataDir: t.TempDir()}})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Start with %s: %v, want %q", tc.path, err, tc.want)
		}
	}
}

// TestTokensFileReload: an identity added to the tokens file can call
// within the reload interval, a removed one no longer can, and a broken
// edit, once a check has refused it, leaves the file in force.
func TestTokensFileReload(t *testing.T) {
	e := startSecure(t, nil)
	cc := e.dial("")
	if err := authCalls["ListPools"](e.as("reader"), cc); err != nil {
		t.Fatal(err)
	}
	e.Token["late"] = testpki.Token("late")
	testpki.WriteFile(t, e.TokensFile, []byte("identities:\n  - {name: late, roles: operator-read, token_sha256: "+auth.HashToken(e.Token["late"])+"}\n"))
	testwait.Eventually(t, "the new identity", func() bool { return authCalls["ListPools"](e.as("late"), cc) == nil })
	if err := authCalls["ListPools"](e.as("reader"), cc); status.Code(err) != codes.Unauthenticated {
		t.Errorf("removed identity: %v, want Unauthenticated", err)
	}
	before, _ := e.reloadStats()
	testpki.WriteFile(t, e.TokensFile, []byte("identities: [\n"))
	testwait.Eventually(t, "a check to refuse the broken edit", func() bool {
		// Calls are what trigger a check; the broken edit does not change
		// who "late" is, so the call still succeeds.
		if err := authCalls["ListPools"](e.as("late"), cc); err != nil {
			t.Fatalf("ListPools as late, during the broken edit: %v", err)
		}
		now, _ := e.reloadStats()
		return now.Failures > before.Failures
	})
	if err := authCalls["ListPools"](e.as("late"), cc); err != nil {
		t.Errorf("after a broken edit the file in force still applies: %v", err)
	}
	if now, _ := e.reloadStats(); now.Reloads != before.Reloads {
		t.Errorf("reloads %d after the broken edit, want %d", now.Reloads, before.Reloads)
	}
}
