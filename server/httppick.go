package server

import (
	"github.com/prefixroute/prefixroute/frontend"

	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"time"

	"go.opentelemetry.io/otel/attribute"
	otelcodes "go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/internal/auth"
	"github.com/prefixroute/prefixroute/internal/netaddr"
	"github.com/prefixroute/prefixroute/internal/openai"

	"github.com/prefixroute/prefixroute/internal/gateway"
)

// The Pick front ends of the HTTP listener (--http-listen), for gateways
// that can make an HTTP subrequest but not a gRPC call:
//
//	POST /v1/pick   a PickRequest in the canonical protobuf JSON mapping
//	                (64-bit integers as strings) -> the PickResponse in it;
//	                an error is the gRPC status's HTTP status with the
//	                google.rpc.Status as JSON: {"code": 5, "message": "..."}
//	POST /v1/route  an OpenAI request body, unchanged -> 204 with the
//	                chosen address in x-gateway-destination-endpoint
//	                (httproute.go)
//
// Both are a Pick as the gRPC one is: authorized as PickService.Pick
// (role gateway, by bearer token or verified client certificate), decided
// and recorded by Server.PickFor (metrics, span, decision log, failed-pick
// log line). With authentication on and TLS off they are served only on
// a loopback --http-listen (else 403), as the gRPC listener refuses to
// start there: bearer tokens must not cross a network in cleartext
// (--insecure allows it, when a mesh encrypts the traffic). Neither keeps
// any part of a body after its request.

// Paths of the HTTP Pick front ends.
const (
	PathPick  = "/v1/pick"
	PathRoute = "/v1/route"
)

// httpPicker serves POST /v1/pick and /v1/route. Safe for concurrent use.
type httpPicker struct {
	srv    *Server
	log    *slog.Logger
	auth   authorizer // nil: authentication off
	tracer trace.Tracer
	prop   propagation.TextMapPropagator
	// maxPickBytes bounds a /v1/pick body: the gRPC listener's message
	// limit, DaemonConfig.MaxRecvMsgBytes (--max-message-bytes, 4 MiB).
	maxPickBytes int
	// refused, when set, is why neither endpoint is served on this
	// listener: every request gets 403 with it.
	refused string
	router  *router // /v1/route's mapping (httproute.go)
}

// newHTTPPicker returns the front ends of d for its configuration; d's
// telemetry, server and security are set up.
func newHTTPPicker(cfg *DaemonConfig, d *Daemon) (*httpPicker, error) {
	p := &httpPicker{srv: d.srv, log: d.log, auth: d.auth, prop: d.tel.propagator, maxPickBytes: cfg.MaxRecvMsgBytes,
		tracer: d.tel.tracer.Tracer("github.com/prefixroute/prefixroute/server")}
	if p.refused = pickRefusal(cfg, d.auth != nil, d.tls != nil); p.refused != "" {
		d.log.Warn(p.refused)
	}
	var err error
	p.router, err = newRouter(cfg, d.srv)
	return p, err
}

// pickRefusal is why the Pick front ends are not served on the HTTP
// listener, or "" when they are: with authentication on and TLS off they
// are served on loopback only (bearer tokens must not cross a network in
// cleartext), unless --insecure. Without authentication, checkExposure
// already keeps the listener on loopback.
func pickRefusal(cfg *DaemonConfig, authOn, tlsOn bool) string {
	if !authOn || tlsOn || cfg.Insecure || netaddr.IsLoopback(cfg.HTTPListen) {
		return ""
	}
	return fmt.Sprintf("%s and %s are not served on --http-listen %s: authentication is on and TLS is off, so bearer tokens would cross the network in cleartext; listen on loopback, set --tls-cert/--tls-key, or pass --insecure when a mesh encrypts the traffic",
		PathPick, PathRoute, cfg.HTTPListen)
}

// register adds both endpoints to mux.
func (p *httpPicker) register(mux *http.ServeMux) {
	mux.HandleFunc("POST "+PathPick, p.servePick)
	mux.HandleFunc("POST "+PathRoute, p.serveRoute)
}

// servePick is POST /v1/pick.
func (p *httpPicker) servePick(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	ctx, span := p.startSpan(r, PathPick)
	defer span.End()
	defer p.recovered(ctx, w, PathPick)
	code := p.pickJSON(ctx, w, r, start)
	endSpan(span, code)
}

// recovered, deferred by a handler, turns its panic into a logged error
// with the stack, a count in prefixroute_panics_recovered_total and a 500
// answer, as the gRPC recovery interceptor does; the server keeps serving.
func (p *httpPicker) recovered(ctx context.Context, w http.ResponseWriter, path string) {
	v := recover()
	if v == nil {
		return
	}
	p.srv.obs.panicked(ctx)
	if p.log != nil {
		p.log.ErrorContext(ctx, "recovered from a panic in an HTTP pick handler; the request fails with 500, the server keeps serving",
			"path", path, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
	}
	writeStatus(w, status.Error(codes.Internal, "internal error: the router recovered from a panic while handling this request; its log has the details"))
}

// pickJSON answers one /v1/pick and returns the HTTP status it wrote.
func (p *httpPicker) pickJSON(ctx context.Context, w http.ResponseWriter, r *http.Request, start time.Time) int {
	ctx, err := p.authorize(ctx, r)
	if err != nil {
		return writeStatus(w, err)
	}
	body, err := readBody(w, r, p.maxPickBytes)
	if err != nil {
		return writeStatus(w, bodyStatus(err))
	}
	req := &pb.PickRequest{}
	if err := protojson.Unmarshal(body, req); err != nil {
		return writeStatus(w, status.Errorf(codes.InvalidArgument, "body is not a PickRequest in protobuf JSON: %v", err))
	}
	resp, err := p.srv.PickFor(ctx, req, frontend.PickMeta{Start: start, Service: httpService, Method: "POST " + PathPick})
	if err != nil {
		return writeStatus(w, err)
	}
	out, err := protojson.Marshal(resp)
	if err != nil {
		return writeStatus(w, status.Errorf(codes.Internal, "encoding the PickResponse: %v", err))
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	w.Write(out)
	return http.StatusOK
}

// httpService names the HTTP front ends in PickFor's failed-pick log line.
const httpService = "prefixroute.http"

// authorize checks the request's credentials as a gRPC Pick's (role
// gateway) and returns the context carrying the caller; the error is a
// gRPC status (Unauthenticated, PermissionDenied).
func (p *httpPicker) authorize(ctx context.Context, r *http.Request) (context.Context, error) {
	if p.refused != "" {
		return nil, status.Error(codes.PermissionDenied, p.refused)
	}
	if p.auth == nil {
		return ctx, nil
	}
	actx, err := p.auth.Authorize(auth.HTTPContext(ctx, r.Header, r.TLS), pb.PickService_Pick_FullMethodName)
	if err != nil {
		return nil, err
	}
	return actx, nil
}

// httpError is a gRPC status answered with an HTTP status of its own
// rather than gateway.HTTPStatus's.
type httpError struct {
	code int
	st   *status.Status
}

func (e *httpError) Error() string              { return e.st.Err().Error() }
func (e *httpError) GRPCStatus() *status.Status { return e.st }

// readBody reads a request body of at most limit bytes. The error wraps
// openai.ErrBodyTooLarge, naming the limit, or openai.ErrBadBody for a
// body that could not be read.
func readBody(w http.ResponseWriter, r *http.Request, limit int) ([]byte, error) {
	if r.ContentLength > int64(limit) {
		return nil, fmt.Errorf("%w: %d bytes; the limit is %d bytes", openai.ErrBodyTooLarge, r.ContentLength, limit)
	}
	// Sized by Content-Length when the client sent one (io.ReadAll would
	// grow from 512 bytes, copying a 16 KiB prompt five times).
	buf := bytes.NewBuffer(make([]byte, 0, max(r.ContentLength, 0)+bytes.MinRead))
	_, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, int64(limit)))
	b := buf.Bytes()
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return nil, fmt.Errorf("%w: over the limit of %d bytes", openai.ErrBodyTooLarge, limit)
	case err != nil:
		return nil, errBodyUnread(err)
	}
	return b, nil
}

// writeStatus answers a gRPC status error with its HTTP status and the
// google.rpc.Status in protobuf JSON, and returns the HTTP status.
func writeStatus(w http.ResponseWriter, err error) int {
	st := status.Convert(err)
	code := gateway.HTTPStatus(st.Code())
	var he *httpError
	if errors.As(err, &he) {
		code = he.code
	}
	out, merr := protojson.Marshal(st.Proto())
	if merr != nil {
		out = []byte(`{"code":13,"message":"encoding the error failed"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	w.Write(out)
	return code
}

// startSpan opens the request's server span, a child of the caller's W3C
// trace context; PickFor puts the decision on it. With tracing off the
// span is not recording but ctx still carries the caller's trace context,
// which the decision log and the failed-pick log line name.
func (p *httpPicker) startSpan(r *http.Request, path string) (context.Context, trace.Span) {
	ctx := p.prop.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
	return p.tracer.Start(ctx, "POST "+path, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("http.request.method", r.Method), attribute.String("url.path", path)))
}

// endSpan records the HTTP status on the span, an error for 5xx (server
// side, as OpenTelemetry's HTTP conventions say).
func endSpan(span trace.Span, code int) {
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(attribute.Int("http.response.status_code", code))
	if code >= 500 {
		span.SetStatus(otelcodes.Error, http.StatusText(code))
	}
}
