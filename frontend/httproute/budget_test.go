package httproute_test

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prefixroute/prefixroute/frontend"
	"github.com/prefixroute/prefixroute/frontend/httproute"
	"github.com/prefixroute/prefixroute/internal/gateway"
)

// TestRouteBodyBudget: /v1/route charges the body it holds to the
// daemon-wide budget it shares with ext_proc (--max-buffered-body-bytes):
// a body that does not fit beside the bytes already held is refused with
// 503 body_budget, one that fits is routed, and every byte comes back when
// the request ends, served or refused.
func TestRouteBodyBudget(t *testing.T) {
	const body = `{"model":"chat","messages":[{"role":"user","content":"hello"}]}`
	budget := gateway.NewBodyBudget(int64(len(body)) + 10)
	h, err := httproute.New(fakePicker{}, httproute.Options{MaxPickBytes: 4096, MaxPrefixBlocks: 64,
		Gateway: gateway.Config{MaxBodyBytes: 4096, BodyBudget: budget},
		HTTP:    frontend.HTTP{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	h.Register(mux)
	route := func(contentLength int64) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, "http://localhost"+httproute.PathRoute, strings.NewReader(body))
		req.ContentLength = contentLength
		req.Header.Set(httproute.OriginalURIHeader, "/v1/chat/completions")
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, req)
		return w
	}
	for _, tc := range []struct {
		name   string
		held   int   // bytes other requests hold
		length int64 // the request's Content-Length (-1: undeclared)
		status int
	}{
		{"fits", 0, int64(len(body)), http.StatusNoContent},
		{"fits at the edge", 10, int64(len(body)), http.StatusNoContent},
		{"one byte over", 11, int64(len(body)), http.StatusServiceUnavailable},
		{"undeclared length charges the limit", 0, -1, http.StatusServiceUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if e := budget.Take(tc.held); e != nil {
				t.Fatal(e)
			}
			w := route(tc.length)
			budget.Give(tc.held)
			if w.Code != tc.status {
				t.Fatalf("status %d (%s), want %d", w.Code, w.Body, tc.status)
			}
			if tc.status == http.StatusServiceUnavailable {
				if r := w.Header().Get("x-prefixroute-reason"); r != gateway.ReasonBodyBudget {
					t.Errorf("reason %q, want %q", r, gateway.ReasonBodyBudget)
				}
			}
			if used := budget.Used(); used != 0 {
				t.Errorf("%d bytes still charged after the request ended", used)
			}
		})
	}
}
