package console_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/prefixroute/prefixroute/frontend/console"
	"github.com/prefixroute/prefixroute/internal/servertest"
)

// fuzzPaths are the endpoints FuzzConsoleAPI aims at; the fuzzer's path
// suffix reaches the rest.
var fuzzPaths = []string{"/ui/api/pools", "/ui/api/pool", "/ui/api/migration", "/ui/api/weights", "/ui/api/ramp/start",
	"/ui/api/ramp/pause", "/ui/api/ramp/abort", "/ui/api/explain", "/ui/", "/ui/api/", "/ui/api/decisions"}

// FuzzConsoleAPI sends arbitrary requests to the console of a real daemon
// (rate limit off, so every request reaches the endpoint's own checks):
// none may panic, every answer is 200 with JSON (or a page), a redirect to
// the cleaned path, or a 4xx or 503 JSON error with a message and a code.
func FuzzConsoleAPI(f *testing.F) {
	sc := servertest.Start(f, servertest.RealClock())
	h := console.Handler(sc.D.Server(), nil, console.Unlimited())
	for _, s := range []struct {
		post       bool
		path       uint8
		suffix     string
		query      string
		body       string
		noHeader   bool
		contentTyp string
	}{
		{false, 1, "", "pool=chat", "", false, ""},
		{false, 2, "", "pool=chat&from=a&to=b&top_k=7", "", false, ""},
		{true, 3, "", "", `{"pool":"chat","weights":{"a":1,"b":2}}`, false, "application/json"},
		{true, 4, "", "", `{"pool":"chat","target":{"a":0,"b":1},"duration":"10m","step_interval":"1m","min_headroom_pct":20}`, false, "application/json"},
		{true, 5, "", "", `{"pool":"chat","ramp_id":1}`, false, "application/json"},
		{true, 7, "", "", `{"pool":"chat","tokens":"1-40,7 9","seed":"18446744073709551615","block_size":4}`, false, "application/json"},
		{true, 7, "", "", `{"pool":"chat","text":"héllo wörld, a prompt","salt":"t","chunk_bytes":3}`, false, "application/json"},
		{false, 8, "app.js", "", "", false, ""},
		{true, 9, "ramp/x", "", `[]`, true, "text/plain"},
		{false, 0, "", "%zz&pool", "", false, ""},
	} {
		f.Add(s.post, s.path, s.suffix, s.query, []byte(s.body), s.noHeader, s.contentTyp)
	}
	f.Fuzz(func(t *testing.T, post bool, path uint8, suffix, query string, body []byte, noHeader bool, contentType string) {
		target := fuzzPaths[int(path)%len(fuzzPaths)] + suffix
		if query != "" {
			target += "?" + query
		}
		method := http.MethodGet
		if post {
			method = http.MethodPost
		}
		if _, err := url.ParseRequestURI(target); err != nil || strings.ContainsAny(target, " \t\r\n#") {
			return // not a request line a client can send
		}
		req := httptest.NewRequestWithContext(t.Context(), method, "http://127.0.0.1:9090"+target, bytes.NewReader(body))
		if post && !noHeader {
			req.Header.Set(console.HeaderName, "1")
		}
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		status, out := w.Code, w.Body.Bytes()
		switch {
		case status/100 == 3 && w.Header().Get("Location") != "": // ServeMux's redirect to the cleaned path
		case status == http.StatusOK || status == http.StatusNotModified:
			if strings.HasPrefix(req.URL.Path, "/ui/api/") && !json.Valid(out) {
				t.Fatalf("%s %s: 200 with a body that is not JSON: %q", method, target, out)
			}
		case status/100 == 4 || status == http.StatusServiceUnavailable:
			var e struct{ Error, Code string }
			if err := json.Unmarshal(out, &e); err != nil || e.Error == "" || e.Code == "" {
				t.Fatalf("%s %s: %d without a JSON error: %q", method, target, status, out)
			}
		default:
			t.Fatalf("%s %s: status %d: %q", method, target, status, out)
		}
	})
}
