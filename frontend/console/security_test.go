package console_test

import (
	"net/http"
	"testing"

	"github.com/prefixroute/prefixroute/daemon"
	"github.com/prefixroute/prefixroute/frontend/console"
	"github.com/prefixroute/prefixroute/internal/servertest"
)

// startWithTokens runs a daemon whose tokens file has reader
// (operator-read), op (operator) and gw (gateway), each with the token
// "<name>-token".
func startWithTokens(t *testing.T) string {
	tokens := writeTokens(t, map[string]string{"reader": "operator-read", "op": "operator", "gw": "gateway"})
	return servertest.Start(t, servertest.Config(func(c *daemon.Config) { c.TokensFile = tokens })).HTTPAddr()
}

func bearer(who string) map[string]string {
	return map[string]string{"Authorization": "Bearer " + who + "-token"}
}

// TestConsoleFloodWithoutToken: requests without a valid token are refused
// (401) before they take from the shared rate limit, so a tokenless flood
// cannot lock an operator out.
func TestConsoleFloodWithoutToken(t *testing.T) {
	addr := startWithTokens(t)
	for i := range 4 * console.Burst {
		hdr := map[string]string(nil)
		if i%2 == 1 {
			hdr = bearer("mallory")
		}
		if a := call(t, addr, "GET", "/ui/api/pools", "", hdr); a.status != http.StatusUnauthorized {
			t.Fatalf("tokenless request %d: %d %q, want 401", i, a.status, a.error)
		}
	}
	if a := call(t, addr, "GET", "/ui/api/pools", "", bearer("op")); a.status != http.StatusOK {
		t.Fatalf("operator after a tokenless flood: %d %q, want 200", a.status, a.error)
	}
}

// TestConsoleAuthenticatesFirst: a write is authenticated and authorized
// before its body is read or parsed: a malformed body without a token is
// 401, and with a token of the wrong role 403, never a parse error.
func TestConsoleAuthenticatesFirst(t *testing.T) {
	addr := startWithTokens(t)
	checkCases(t, addr, []apiCase{
		{"no token, bad body", "POST", "/ui/api/ramp/start", `{"nope":1}`, nil, 401, "no credentials"},
		{"no token, bad JSON", "POST", "/ui/api/weights", `{`, nil, 401, "no credentials"},
		{"reader, bad body", "POST", "/ui/api/ramp/abort", `{"x":`, bearer("reader"), 403, "needs role operator"},
		{"operator, bad body", "POST", "/ui/api/ramp/start", `{"nope":1}`, bearer("op"), 400, "unknown field"},
		{"operator cannot explain", "POST", "/ui/api/explain", `{`, bearer("op"), 403, "needs role gateway"},
	})
}
