package server

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace/noop"
)

// fuzzPicker is the HTTP front ends over a fuzz server (fuzzPool's pool
// "chat"), with small body limits.
func fuzzPicker(t *testing.T) *httpPicker {
	s := fuzzServer(t)
	fuzzPool(t, s)
	cfg := &DaemonConfig{}
	cfg.Gateway.MaxBodyBytes = 4096
	r, err := newRouter(cfg, s)
	if err != nil {
		t.Fatal(err)
	}
	return &httpPicker{srv: s, prop: propagation.TraceContext{}, tracer: noop.NewTracerProvider().Tracer(""),
		maxPickBytes: 4096, router: r}
}

// FuzzHTTPRoute: any body, path and ?pool= gets 204 naming a known
// instance first, or a documented error status with the reason header
// and a JSON error body; never a panic.
func FuzzHTTPRoute(f *testing.F) {
	f.Add("/v1/chat/completions", "", `{"model":"chat","messages":[{"role":"user","content":"hello"}]}`)
	f.Add("/v1/completions", "chat", `{"model":"x","prompt":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17]}`)
	f.Add("/v1/embeddings", "", `{"model":"chat","input":"abc"}`)
	f.Add("/v1/responses", "nope", `{"model":"chat","input":[{"role":"user","content":"x"}]}`)
	f.Add("", "", `{}`)
	f.Add("/v1/chat/completions", "", `{"model":"chat","messages":"x"}`)
	f.Add("/v1/chat/completions", "", strings.Repeat("x", 5000))
	f.Fuzz(func(t *testing.T, path, pool, body string) {
		p := fuzzPicker(t)
		target := "/v1/route"
		if pool != "" {
			target += "?pool=" + strings.ReplaceAll(pool, "&", "")
		}
		req, err := http.NewRequest(http.MethodPost, "http://sidecar"+PathRoute, strings.NewReader(body))
		if err != nil {
			return
		}
		if u, err := req.URL.Parse(target); err == nil {
			req.URL = u
		}
		req.Header.Set(OriginalURIHeader, path)
		w := httptest.NewRecorder()
		p.serveRoute(w, req)
		switch w.Code {
		case http.StatusNoContent:
			inst := w.Header().Get(InstanceHeader)
			if inst == "" || !strings.HasPrefix(w.Header().Get("x-gateway-destination-endpoint"), inst+":8000") {
				t.Fatalf("204 with headers %v", w.Header())
			}
		case 400, 404, 413, 429, 503:
			var e struct{ Error struct{ Code string } }
			if json.Unmarshal(w.Body.Bytes(), &e) != nil || e.Error.Code == "" || e.Error.Code != w.Header().Get("x-prefixroute-reason") {
				t.Fatalf("status %d, reason %q, body %q", w.Code, w.Header().Get("x-prefixroute-reason"), w.Body)
			}
		default:
			t.Fatalf("status %d: %s", w.Code, w.Body)
		}
	})
}

// FuzzHTTPPick: any body gets 200 with a PickResponse or a documented
// status with a google.rpc.Status JSON body; never a panic.
func FuzzHTTPPick(f *testing.F) {
	f.Add(`{"pool":"chat","prefixHashes":["1","2","3"],"promptTokens":64,"seed":"7"}`)
	f.Add(`{"pool":"chat","excludeInstances":["a-1","a-2","b-1"],"audit":"AUDIT_LEVEL_NONE"}`)
	f.Add(`{"pool":"nope"}`)
	f.Add(`{"pool":"chat","loadSnapshot":{"instances":[{"instanceId":"a-1","queueMs":"NaN"}]}}`)
	f.Add(`{"prefix_hashes":["18446744073709551615"],"pool":"chat"}`)
	f.Add(`[]`)
	f.Fuzz(func(t *testing.T, body string) {
		p := fuzzPicker(t)
		req := httptest.NewRequest(http.MethodPost, "http://sidecar"+PathPick, strings.NewReader(body))
		w := httptest.NewRecorder()
		p.servePick(w, req)
		var out map[string]any
		if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil {
			t.Fatalf("status %d, body %q: %v", w.Code, w.Body, err)
		}
		switch w.Code {
		case http.StatusOK:
			if out["instanceId"] == nil {
				t.Fatalf("200 without an instance: %s", w.Body)
			}
		case 400, 404, 413, 503:
			if out["code"] == nil || out["message"] == nil {
				t.Fatalf("status %d, body %s", w.Code, w.Body)
			}
		default:
			t.Fatalf("status %d: %s", w.Code, w.Body)
		}
	})
}

// TestHTTPPickRecoversPanics: a panic in a handler (here: no router) is a
// 500 with a JSON status, not a dropped connection.
func TestHTTPPickRecoversPanics(t *testing.T) {
	p := fuzzPicker(t)
	p.router = nil
	req := httptest.NewRequest(http.MethodPost, "http://sidecar"+PathRoute, strings.NewReader(`{"model":"chat","prompt":"x"}`))
	req.Header.Set(OriginalURIHeader, "/v1/completions")
	w := httptest.NewRecorder()
	p.serveRoute(w, req)
	var st struct {
		Code    int
		Message string
	}
	if w.Code != http.StatusInternalServerError || json.Unmarshal(w.Body.Bytes(), &st) != nil || st.Code != 13 ||
		!strings.Contains(st.Message, "recovered from a panic") {
		t.Fatalf("status %d, body %s", w.Code, w.Body)
	}
}
