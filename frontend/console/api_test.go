package console_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/daemon"
	"github.com/prefixroute/prefixroute/frontend/console"
	"github.com/prefixroute/prefixroute/internal/auth"
	"github.com/prefixroute/prefixroute/internal/servertest"
)

// answer is one HTTP answer of the console: status, the error body's
// fields, and the raw body.
type answer struct {
	status      int
	code, error string
	body        string
	header      http.Header
}

// call sends one request to the console at addr. A write (body != "")
// carries the console header and a JSON content type unless hdr overrides
// them ("" deletes).
func call(t *testing.T, addr, method, path, body string, hdr map[string]string) answer {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+addr+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if method == http.MethodPost {
		req.Header.Set(console.HeaderName, "1")
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range hdr {
		if k == "Host" {
			req.Host = v
			continue
		}
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	a := answer{status: resp.StatusCode, body: string(raw), header: resp.Header}
	if resp.StatusCode >= 400 {
		var e struct{ Error, Code string }
		if err := json.Unmarshal(raw, &e); err != nil {
			t.Fatalf("%s %s: %d with a body that is not a JSON error: %q", method, path, resp.StatusCode, raw)
		}
		a.code, a.error = e.Code, e.Error
		if e.Error == "" || e.Code == "" {
			t.Errorf("%s %s: %d with an empty error or code: %q", method, path, resp.StatusCode, raw)
		}
	}
	return a
}

// TestConsoleEndpoints: the pages and the JSON endpoints' answers, and a
// precise 4xx JSON error for every kind of bad input.
func TestConsoleEndpoints(t *testing.T) {
	f := startFleet(t)
	f.run(f.sc.Conn)
	addr := f.sc.HTTPAddr()
	big := `{"pool":"chat","text":"` + strings.Repeat("x", console.MaxBodyBytes) + `"}`
	checkCases(t, addr, []apiCase{
		{"page", "GET", "/ui/", "", nil, 200, "<title>prefixroute console</title>"},
		{"script", "GET", "/ui/app.js", "", nil, 200, "POLL_MS"},
		{"charts", "GET", "/ui/charts.js", "", nil, 200, "function lineChart"},
		{"watch pages", "GET", "/ui/overview.js", "", nil, 200, "const pageCutover"},
		{"operate pages", "GET", "/ui/operate.js", "", nil, 200, "const pageExplain"},
		{"start", "GET", "/ui/main.js", "", nil, 200, "setInterval(tick, POLL_MS)"},
		{"page loads every script", "GET", "/ui/", "", nil, 200, `<script src="main.js" defer>`},
		{"no listing", "GET", "/ui/static/", "", nil, 404, "no console page"},
		{"page by POST", "POST", "/ui/", "{}", nil, 405, "take GET"},
		{"unknown endpoint", "GET", "/ui/api/nope", "", nil, 404, "no console endpoint GET /ui/api/nope"},
		{"pools", "GET", "/ui/api/pools", "", nil, 200, `"pool":"chat"`},
		{"pool", "GET", "/ui/api/pool?pool=chat", "", nil, 200, `"deployment":"a"`},
		{"pool without history", "GET", "/ui/api/pool?pool=chat&history=0", "", nil, 200, `"history":null`},
		{"pool missing", "GET", "/ui/api/pool", "", nil, 400, "query pool is required"},
		{"pool twice", "GET", "/ui/api/pool?pool=a&pool=b", "", nil, 400, "query pool is given 2 times"},
		{"pool too long", "GET", "/ui/api/pool?pool=" + strings.Repeat("p", console.MaxQueryBytes+1), "", nil, 400, "the limit is 256"},
		{"pool unknown", "GET", "/ui/api/pool?pool=nope", "", nil, 404, `"nope"`},
		{"history bad", "GET", "/ui/api/pool?pool=chat&history=2", "", nil, 400, "want 0 or 1"},
		{"migration", "GET", "/ui/api/migration?pool=chat&from=a&to=b", "", nil, 200, `"can_absorb"`},
		{"migration without to", "GET", "/ui/api/migration?pool=chat&from=a", "", nil, 400, "query to is required"},
		{"migration unknown deployment", "GET", "/ui/api/migration?pool=chat&from=a&to=zz", "", nil, 404, "zz"},
		{"migration top_k", "GET", "/ui/api/migration?pool=chat&from=a&to=b&top_k=x", "", nil, 400, "top_k"},
		{"write without header", "POST", "/ui/api/weights", `{"pool":"chat","weights":{"a":1}}`, map[string]string{console.HeaderName: ""}, 403, "X-Prefixroute-Console"},
		{"write as a form", "POST", "/ui/api/weights", `pool=chat`, map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, 403, "application/json"},
		{"write cross-origin", "POST", "/ui/api/weights", `{}`, map[string]string{"Origin": "http://evil.example"}, 403, "is not this listener's"},
		{"write cross-site", "POST", "/ui/api/weights", `{}`, map[string]string{"Sec-Fetch-Site": "cross-site"}, 403, "Sec-Fetch-Site"},
		{"body too big", "POST", "/ui/api/explain", big, nil, 413, "over 1048576 bytes"},
		{"unknown field", "POST", "/ui/api/weights", `{"pool":"chat","wieghts":{}}`, nil, 400, `unknown field "wieghts"`},
		{"two objects", "POST", "/ui/api/weights", `{"pool":"chat"} {}`, nil, 400, "one JSON object"},
		{"not JSON", "POST", "/ui/api/weights", `{"pool":`, nil, 400, "request body"},
		{"bad weight", "POST", "/ui/api/weights", `{"pool":"chat","weights":{"a":-1}}`, nil, 400, "-1"},
		{"weights of an unknown pool", "POST", "/ui/api/weights", `{"pool":"chta","weights":{"a":1}}`, nil, 404, "allow_new_pool"},
		{"ramp of an unknown pool", "POST", "/ui/api/ramp/start", `{"pool":"chta","target":{"a":1},"duration":"2m","step_interval":"1m"}`, nil, 404, `"chta"`},
		{"ramp op unknown", "POST", "/ui/api/ramp/skip", `{"pool":"chat"}`, nil, 404, "want start, pause, resume or abort"},
		{"ramp bad duration", "POST", "/ui/api/ramp/start", `{"pool":"chat","target":{"b":1},"duration":"soon","step_interval":"1m"}`, nil, 400, `duration is "soon"`},
		{"ramp pause without ramp", "POST", "/ui/api/ramp/pause", `{"pool":"chat"}`, nil, 404, "never had a ramp"},
		{"explain", "POST", "/ui/api/explain", `{"pool":"chat","text":"` + explainPrompt + `","seed":"1"}`, nil, 200, `"deployment":"a","decision"`},
		{"explain tokens", "POST", "/ui/api/explain", `{"pool":"chat","tokens":"0-63, 7"}`, nil, 200, `"blocks":4`},
		{"explain empty", "POST", "/ui/api/explain", `{"pool":"chat"}`, nil, 400, "the prompt is empty"},
		{"explain both", "POST", "/ui/api/explain", `{"pool":"chat","text":"x","tokens":"1"}`, nil, 400, "not both"},
		{"explain bad token", "POST", "/ui/api/explain", `{"pool":"chat","tokens":"1,x"}`, nil, 400, `"x" is not a token id`},
		{"explain bad range", "POST", "/ui/api/explain", `{"pool":"chat","tokens":"9-3"}`, nil, 400, `range "9-3"`},
		{"explain too many tokens", "POST", "/ui/api/explain", `{"pool":"chat","tokens":"0-4294967295"}`, nil, 400, "more than 524288 token ids"},
		{"explain bad seed", "POST", "/ui/api/explain", `{"pool":"chat","text":"x","seed":"-1"}`, nil, 400, `seed is "-1"`},
		{"explain bad block size", "POST", "/ui/api/explain", `{"pool":"chat","text":"x","block_size":65}`, nil, 400, "block_size in 1..64"},
		{"explain unknown pool", "POST", "/ui/api/explain", `{"pool":"nope","text":"x"}`, nil, 404, `"nope"`},
		{"decisions, log off", "GET", "/ui/api/decisions?pool=chat", "", nil, 200, `{"enabled":false,"decisions":[]}`},
		{"decisions without pool", "GET", "/ui/api/decisions", "", nil, 400, "query pool is required"},
		{"rebinding", "GET", "/ui/api/pools", "", map[string]string{"Host": "evil.example:9090"}, 403, "not a loopback name"},
		{"localhost", "GET", "/ui/api/pools", "", map[string]string{"Host": "localhost:9090"}, 200, `"pools"`},
	})
	a := call(t, addr, "GET", "/ui/", "", nil)
	if csp := a.header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") {
		t.Errorf("Content-Security-Policy %q", csp)
	}
}

// TestConsoleWrites: SetWeights, then a ramp started, paused, resumed and
// aborted through the console, each visible through the gRPC API.
func TestConsoleWrites(t *testing.T) {
	sc := servertest.Start(t, servertest.RealClock())
	addr := sc.HTTPAddr()
	post := func(path, body string) string {
		t.Helper()
		a := call(t, addr, "POST", path, body, nil)
		if a.status != 200 {
			t.Fatalf("POST %s: %d %s: %s", path, a.status, a.code, a.error)
		}
		return a.body
	}
	if got := post("/ui/api/weights", `{"pool":"chat","weights":{"a":1,"b":3},"allow_new_pool":true}`); !strings.Contains(got, `"version":"1"`) {
		t.Errorf("SetWeights answered %s", got)
	}
	post("/ui/api/ramp/start", `{"pool":"chat","target":{"a":0,"b":1},"duration":"1h","step_interval":"10m"}`)
	for _, op := range []struct{ op, state string }{{"pause", "PAUSED"}, {"resume", "RUNNING"}, {"abort", "ABORTED"}} {
		post("/ui/api/ramp/"+op.op, `{"pool":"chat","ramp_id":1}`)
		r, err := sc.Admin.GetRamp(t.Context(), &pb.GetRampRequest{Pool: "chat"})
		if err != nil {
			t.Fatal(err)
		}
		if got := r.GetRamp().GetState().String(); got != "RAMP_STATE_"+op.state {
			t.Errorf("after %s: ramp is %s", op.op, got)
		}
	}
	if a := call(t, addr, "POST", "/ui/api/ramp/pause", `{"pool":"chat","ramp_id":1}`, nil); a.status/100 != 4 {
		t.Errorf("pause of an aborted ramp: %d %s", a.status, a.error)
	}
}

// TestConsoleRateLimit: past the burst, requests get 429 with Retry-After.
func TestConsoleRateLimit(t *testing.T) {
	sc := servertest.Start(t)
	limited := 0
	for range 4 * console.Burst {
		if a := call(t, sc.HTTPAddr(), "GET", "/ui/api/nope", "", nil); a.status == http.StatusTooManyRequests {
			limited++
			if a.header.Get("Retry-After") != "1" || !strings.Contains(a.error, "50 requests/s") {
				t.Fatalf("429 without Retry-After 1 or the limit: %v %q", a.header, a.error)
			}
		}
	}
	if limited == 0 {
		t.Fatalf("%d requests in a row, none limited", 4*console.Burst)
	}
}

// TestConsoleAuthorization: with a tokens file, every endpoint is
// authorized as its gRPC method: no token is 401, operator-read reads but
// cannot write (403), operator writes, explain needs gateway; and the Host
// check of the loopback-only mode is off.
func TestConsoleAuthorization(t *testing.T) {
	tokens := writeTokens(t, map[string]string{"reader": "operator-read", "op": "operator", "gw": "gateway"})
	sc := servertest.Start(t, servertest.Config(func(c *daemon.Config) { c.TokensFile = tokens }))
	addr := sc.HTTPAddr()
	bearer := func(who string) map[string]string {
		return map[string]string{"Authorization": "Bearer " + who + "-token"}
	}
	checkCases(t, addr, []apiCase{
		{"no token", "GET", "/ui/api/pools", "", nil, 401, "no credentials"},
		{"unknown token", "GET", "/ui/api/pools", "", bearer("mallory"), 401, "not recognised"},
		{"not bearer", "GET", "/ui/api/pools", "", map[string]string{"Authorization": "Basic eDp5"}, 401, "Bearer <token>"},
		{"page needs no token", "GET", "/ui/", "", nil, 200, "Bearer token"},
		{"reader lists", "GET", "/ui/api/pools", "", bearer("reader"), 200, `"pools"`},
		{"reader reads", "GET", "/ui/api/pool?pool=chat", "", bearer("reader"), 404, `"chat"`},
		{"reader cannot write", "POST", "/ui/api/weights", `{"pool":"chat","weights":{"a":1}}`, bearer("reader"), 403, "needs role operator"},
		{"gateway cannot read", "GET", "/ui/api/pools", "", bearer("gw"), 403, "needs role operator-read"},
		{"operator writes", "POST", "/ui/api/weights", `{"pool":"chat","weights":{"a":1},"allow_new_pool":true}`, bearer("op"), 200, `"version":"1"`},
		{"reader reads it", "GET", "/ui/api/pool?pool=chat", "", bearer("reader"), 200, `"version":"1"`},
		{"reader reads capacity", "GET", "/ui/api/capacity?pool=chat", "", bearer("reader"), 200, `"calibration"`},
		{"gateway cannot read capacity", "GET", "/ui/api/capacity?pool=chat", "", bearer("gw"), 403, "needs role operator-read"},
		{"capacity needs a token", "GET", "/ui/api/capacity?pool=chat", "", nil, 401, "no credentials"},
		{"operator cannot explain", "POST", "/ui/api/explain", `{"pool":"chat","text":"x"}`, bearer("op"), 403, "needs role gateway"},
		{"gateway explains", "POST", "/ui/api/explain", `{"pool":"chat","text":"x"}`, bearer("gw"), 503, "no instances"},
		{"any Host with auth", "GET", "/ui/api/pools", "", map[string]string{"Authorization": "Bearer reader-token", "Host": "router.example:9090"}, 200, `"pools"`},
	})
}

// writeTokens writes a tokens file of identities (name → role), each with
// the token "<name>-token".
func writeTokens(t *testing.T, ids map[string]string) string {
	t.Helper()
	var b bytes.Buffer
	b.WriteString("identities:\n")
	for name, role := range ids {
		fmt.Fprintf(&b, "  - name: %s\n    roles: [%s]\n    token_sha256: %s\n", name, role, auth.HashToken(name+"-token"))
	}
	path := filepath.Join(t.TempDir(), "tokens.yaml")
	if err := os.WriteFile(path, b.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestConsoleAllowDrain: the console's weight and ramp writes take
// allow_drain, the override the drain guard names, to the gRPC request.
func TestConsoleAllowDrain(t *testing.T) {
	sc := servertest.Start(t)
	addr := sc.HTTPAddr()
	if a := call(t, addr, "POST", "/ui/api/weights", `{"pool":"chat","weights":{"a":0},"allow_drain":true,"allow_new_pool":true}`, nil); a.status != 200 {
		t.Fatalf("weights with allow_drain: %d %s: %s", a.status, a.code, a.error)
	}
	if a := call(t, addr, "POST", "/ui/api/ramp/start", `{"pool":"chat","target":{"a":0,"b":1},"duration":"1h","step_interval":"10m","allow_drain":true}`, nil); a.status != 200 {
		t.Fatalf("ramp with allow_drain: %d %s: %s", a.status, a.code, a.error)
	}
	r, err := sc.Admin.GetRamp(t.Context(), &pb.GetRampRequest{Pool: "chat"})
	if err != nil {
		t.Fatal(err)
	}
	if !r.GetRamp().GetAllowDrain() {
		t.Fatalf("ramp %v: allow_drain not carried to StartRamp", r.GetRamp())
	}
}

// apiCase is one request to the console and what its answer must say.
type apiCase struct {
	name, method, path, body string
	hdr                      map[string]string
	status                   int
	want                     string // in the error message, or in the body of a 2xx
}

// checkCases sends each case to the console at addr, as a subtest, and
// checks its status and what its answer says.
func checkCases(t *testing.T, addr string, cases []apiCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := call(t, addr, c.method, c.path, c.body, c.hdr)
			if a.status != c.status {
				t.Fatalf("status %d (%s: %s), want %d", a.status, a.code, a.error, c.status)
			}
			got := a.error
			if a.status < 400 {
				got = a.body
			}
			if !strings.Contains(got, c.want) {
				t.Errorf("answer %q does not say %q", got, c.want)
			}
		})
	}
}
