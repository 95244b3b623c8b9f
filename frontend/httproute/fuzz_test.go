package httproute_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/frontend"
	"github.com/prefixroute/prefixroute/frontend/httproute"
	"github.com/prefixroute/prefixroute/internal/gateway"
)

// fakePicker knows pool "chat" with instances a-1 and b-1 on port 8000;
// any other pool is NotFound, a pick of "chat" excluding both is
// Unavailable. panics makes PickFor panic.
type fakePicker struct{ panics bool }

func (f fakePicker) PickFor(_ context.Context, req *pb.PickRequest, _ frontend.PickMeta) (*pb.PickResponse, error) {
	if f.panics {
		panic("fake picker")
	}
	if req.GetPool() != "chat" {
		return nil, status.Errorf(codes.NotFound, "no pool %q", req.GetPool())
	}
	for _, id := range []string{"a-1", "b-1"} {
		if !strings.Contains(strings.Join(req.GetExcludeInstances(), ","), id) {
			return &pb.PickResponse{InstanceId: id, Address: id + ":8000", Deployment: id[:1]}, nil
		}
	}
	return nil, status.Error(codes.Unavailable, "every instance excluded")
}

func (fakePicker) BlockSize(string) int { return 16 }

func (fakePicker) Endpoints(string, []frontend.Endpoint) ([]frontend.Endpoint, error) {
	return nil, nil
}

func (fakePicker) MaxExcludes() int { return 1024 }

func (fakePicker) RecordServed(context.Context, string, string, string, string) {}

// fuzzHandler is the front ends over p, with small body limits.
func fuzzHandler(t *testing.T, p frontend.Picker) http.Handler {
	h, err := httproute.New(p, httproute.Options{MaxPickBytes: 4096, MaxPrefixBlocks: 64, Gateway: gateway.Config{MaxBodyBytes: 4096},
		HTTP: frontend.HTTP{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	h.Register(mux)
	return mux
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
		h := fuzzHandler(t, fakePicker{})
		target := httproute.PathRoute
		if pool != "" {
			target += "?pool=" + strings.ReplaceAll(pool, "&", "")
		}
		req, err := http.NewRequest(http.MethodPost, "http://localhost"+httproute.PathRoute, strings.NewReader(body))
		if err != nil {
			return
		}
		if u, err := req.URL.Parse(target); err == nil && u.Path == httproute.PathRoute {
			req.URL = u
		}
		req.Header.Set(httproute.OriginalURIHeader, path)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		switch w.Code {
		case http.StatusNoContent:
			inst := w.Header().Get(httproute.InstanceHeader)
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
	f.Add(strings.Repeat(" ", 5000))
	f.Fuzz(func(t *testing.T, body string) {
		h := fuzzHandler(t, fakePicker{})
		req := httptest.NewRequest(http.MethodPost, "http://localhost"+httproute.PathPick, strings.NewReader(body))
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
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

// TestHTTPPickRecoversPanics: a panic in a handler is a 500 with a JSON
// status, not a dropped connection, on both routes.
func TestHTTPPickRecoversPanics(t *testing.T) {
	h := fuzzHandler(t, fakePicker{panics: true})
	for path, body := range map[string]string{httproute.PathRoute: `{"model":"chat","prompt":"x"}`, httproute.PathPick: `{"pool":"chat"}`} {
		req := httptest.NewRequest(http.MethodPost, "http://localhost"+path, strings.NewReader(body))
		req.Header.Set(httproute.OriginalURIHeader, "/v1/completions")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		var st struct {
			Code    int
			Message string
		}
		if w.Code != http.StatusInternalServerError || json.Unmarshal(w.Body.Bytes(), &st) != nil || st.Code != 13 ||
			!strings.Contains(st.Message, "recovered from a panic") {
			t.Fatalf("%s: status %d, body %s", path, w.Code, w.Body)
		}
	}
}
