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

// TestConsoleStrictJSON: console writes refuse what gRPC's protojson
// refuses: a key twice in one object (encoding/json would keep the last),
// bytes that are not UTF-8 and escapes of half a surrogate pair (it would
// rewrite both to U+FFFD).
func TestConsoleStrictJSON(t *testing.T) {
	addr := servertest.Start(t).HTTPAddr()
	checkCases(t, addr, []apiCase{
		{"pool twice", "POST", "/ui/api/weights", `{"pool":"csrf","weights":{"a":1},"pool":"m"}`, nil, 400, `key "pool" appears twice`},
		{"deployment twice", "POST", "/ui/api/weights", `{"pool":"m","weights":{"a":1,"a":2}}`, nil, 400, `key "a" appears twice`},
		{"not UTF-8", "POST", "/ui/api/weights", "{\"pool\":\"m\",\"weights\":{\"a\xfe\":1}}", nil, 400, "not valid UTF-8"},
		{"explain, key twice", "POST", "/ui/api/explain", `{"pool":"m","pool":"n","text":"x"}`, nil, 400, "appears twice"},
		{"lone high surrogate", "POST", "/ui/api/weights", `{"pool":"m","weights":{"a\ud800":1}}`, nil, 400, `\ud800 at byte 25 is half of a UTF-16 surrogate pair`},
		{"lone low surrogate", "POST", "/ui/api/weights", `{"pool":"m\uDC00","weights":{"a":1}}`, nil, 400, "half of a UTF-16 surrogate pair"},
		{"high then not low", "POST", "/ui/api/weights", `{"pool":"m","weights":{"\ud800\u0041":1}}`, nil, 400, "surrogate pair"},
		{"escaped backslash before u", "POST", "/ui/api/weights", `{"pool":"esc","weights":{"a\\ud800":1},"allow_new_pool":true}`, nil, 200, `"version":"1"`},
		{"a whole pair", "POST", "/ui/api/weights", `{"pool":"pair","weights":{"\ud83d\ude00":1},"allow_new_pool":true}`, nil, 200, `"version":"1"`},
		{"same key in two objects", "POST", "/ui/api/weights", `{"pool":"n","weights":{"pool":1},"allow_new_pool":true}`, nil, 200, `"version":"1"`},
		{"one of each", "POST", "/ui/api/weights", `{"pool":"m","weights":{"a":1,"b":0},"allow_new_pool":true}`, nil, 200, `"version":"1"`},
	})
}

// TestConsoleWriteOrigin: a write's Origin must be the console's own
// scheme and host (Origin: null is refused), and its content type
// application/json exactly.
func TestConsoleWriteOrigin(t *testing.T) {
	addr := servertest.Start(t).HTTPAddr()
	w := `{"pool":"m","weights":{"a":1},"allow_new_pool":true}`
	checkCases(t, addr, []apiCase{
		{"Origin null", "POST", "/ui/api/weights", w, map[string]string{"Origin": "null"}, 403, "Origin"},
		{"other scheme", "POST", "/ui/api/weights", w, map[string]string{"Origin": "https://" + addr}, 403, "Origin"},
		{"jsonx", "POST", "/ui/api/weights", w, map[string]string{"Content-Type": "application/jsonx"}, 403, "Content-Type"},
		{"json with charset", "POST", "/ui/api/weights", w, map[string]string{"Content-Type": "application/json; charset=utf-8", "Origin": "http://" + addr}, 200, `"version"`},
	})
}
