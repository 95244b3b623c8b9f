package frontend_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/prefixroute/prefixroute/frontend"
)

// tokenAuth allows the bearer token "good" and records the method.
type tokenAuth struct{ method string }

func (a *tokenAuth) Authorize(ctx context.Context, fullMethod string) (context.Context, error) {
	a.method = fullMethod
	md, _ := metadata.FromIncomingContext(ctx)
	switch v := md.Get("authorization"); {
	case len(v) == 0:
		return nil, status.Error(codes.Unauthenticated, "no token")
	case v[0] != "Bearer good":
		return nil, status.Error(codes.PermissionDenied, "bad token")
	}
	return context.WithValue(ctx, callerKey{}, "gw"), nil
}

type callerKey struct{}

func TestWrap(t *testing.T) {
	const path, method = "/v1/x", "/svc/Method"
	for _, tc := range []struct {
		name      string
		auth      bool
		refused   string
		token     string
		serve     func(w http.ResponseWriter) int
		denied    bool // a Denied writer of the route's own
		wantCode  int
		wantBody  string // substring
		wantPanic bool
		wantSpan  string // span status description, "" for unset
	}{
		{name: "auth off", serve: ok, wantCode: 200, wantBody: "served"},
		{name: "good token", auth: true, token: "good", serve: ok, wantCode: 200, wantBody: "served"},
		{name: "no token", auth: true, serve: ok, wantCode: 401, wantBody: `"message":"no token"`},
		{name: "bad token", auth: true, token: "bad", serve: ok, wantCode: 403, wantBody: "bad token"},
		{name: "bad token, own format", auth: true, token: "bad", serve: ok, denied: true, wantCode: 499, wantBody: "denied: bad token"},
		{name: "refused", auth: true, token: "good", refused: "not here", serve: ok, wantCode: 403, wantBody: "not here"},
		{name: "panic", serve: func(http.ResponseWriter) int { panic("boom") }, wantCode: 500, wantBody: "recovered from a panic", wantPanic: true, wantSpan: "Internal Server Error"},
		{name: "server error", serve: func(w http.ResponseWriter) int {
			return frontend.WriteStatus(w, &frontend.StatusError{Code: 503, Status: status.New(codes.Unavailable, "gone")})
		}, wantCode: 503, wantBody: "gone", wantSpan: "Service Unavailable"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spans := tracetest.NewSpanRecorder()
			var logs bytes.Buffer
			panics := 0
			h := frontend.HTTP{Refused: tc.refused, Tracer: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans)),
				Logger: slog.New(slog.NewTextHandler(&logs, nil)), Panicked: func(context.Context) { panics++ }}
			a := &tokenAuth{}
			if tc.auth {
				h.Auth = a
			}
			var got frontend.PickMeta
			rt := frontend.Route{Path: path, FullMethod: method, Serve: func(ctx context.Context, w http.ResponseWriter, r *http.Request, meta frontend.PickMeta) int {
				got = meta
				if p, ok := peer.FromContext(ctx); !ok || p.Addr.String() != "192.0.2.1:1234" {
					t.Errorf("peer %v, want 192.0.2.1:1234", p)
				}
				if tc.auth && ctx.Value(callerKey{}) != "gw" {
					t.Error("Serve's context does not carry the caller")
				}
				return tc.serve(w)
			}}
			if tc.denied {
				rt.Denied = func(w http.ResponseWriter, err error) int {
					w.WriteHeader(499)
					w.Write([]byte("denied: " + status.Convert(err).Message()))
					return 499
				}
			}
			req := httptest.NewRequest("POST", path, strings.NewReader("{}"))
			req.Host = "localhost" // authentication off: a loopback Host
			req.RemoteAddr = "192.0.2.1:1234"
			req.Header.Set("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
			if tc.token != "" {
				req.Header.Set("Authorization", "Bearer "+tc.token)
			}
			rec := httptest.NewRecorder()
			frontend.Wrap(h, rt).ServeHTTP(rec, req)
			if rec.Code != tc.wantCode || !strings.Contains(rec.Body.String(), tc.wantBody) {
				t.Fatalf("answer %d %q, want %d containing %q", rec.Code, rec.Body, tc.wantCode, tc.wantBody)
			}
			if tc.auth && tc.refused == "" && a.method != method {
				t.Errorf("authorized as %q, want %q", a.method, method)
			}
			if served := rec.Code == 200 || tc.wantPanic || tc.wantCode == 503; served &&
				(got.Service != frontend.HTTPService || got.Method != "POST "+path || got.Start.IsZero()) {
				t.Errorf("PickMeta %+v, want %s, POST %s and a start", got, frontend.HTTPService, path)
			}
			if want := map[bool]int{true: 1}[tc.wantPanic]; panics != want || strings.Contains(logs.String(), "boom") != tc.wantPanic {
				t.Errorf("%d panics counted, log %q; want %d", panics, logs.String(), want)
			}
			ended := spans.Ended()
			if len(ended) != 1 {
				t.Fatalf("%d spans, want 1", len(ended))
			}
			s := ended[0]
			if s.Name() != "POST "+path || s.Parent().TraceID().String() != "0af7651916cd43dd8448eb211c80319c" {
				t.Errorf("span %q with parent %v, want POST %s under the caller's trace", s.Name(), s.Parent().TraceID(), path)
			}
			if s.Status().Description != tc.wantSpan {
				t.Errorf("span status %q, want %q", s.Status().Description, tc.wantSpan)
			}
		})
	}
}

func ok(w http.ResponseWriter) int {
	w.WriteHeader(200)
	w.Write([]byte("served"))
	return 200
}

func TestWriteStatus(t *testing.T) {
	for _, tc := range []struct {
		err  error
		code int
	}{
		{status.Error(codes.NotFound, "no pool"), http.StatusNotFound},
		{status.Error(codes.InvalidArgument, "bad"), http.StatusBadRequest},
		{&frontend.StatusError{Code: 413, Status: status.New(codes.ResourceExhausted, "big")}, 413},
	} {
		rec := httptest.NewRecorder()
		if got := frontend.WriteStatus(rec, tc.err); got != tc.code || rec.Code != tc.code {
			t.Errorf("%v: status %d (wrote %d), want %d", tc.err, got, rec.Code, tc.code)
		}
		var body struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || codes.Code(body.Code) != status.Code(tc.err) ||
			body.Message != status.Convert(tc.err).Message() {
			t.Errorf("%v: body %s (%v)", tc.err, rec.Body, err)
		}
	}
}
