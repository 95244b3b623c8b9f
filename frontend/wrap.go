package frontend

import (
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
	tracenoop "go.opentelemetry.io/otel/trace/noop"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/prefixroute/prefixroute/internal/gateway"
)

// HTTPService names the HTTP front ends in PickFor's failed-pick log line
// (grpc.service); the method is "POST " and the route's path.
const HTTPService = "prefixroute.http"

// HTTP is what Wrap needs of the daemon, the same for every HTTP route of
// a listener.
type HTTP struct {
	// Auth authorizes each request as its route's gRPC method; nil means
	// authentication is off.
	Auth Authorizer
	// Refused, when set, is why the routes are not served on this
	// listener: every request gets PermissionDenied (403) with it, the
	// daemon's exposure rule.
	Refused string
	// Tracer opens the server span of each request; nil means none (the
	// context still carries the caller's trace context).
	Tracer trace.TracerProvider
	// Propagator extracts the caller's trace context from the headers;
	// nil means W3C trace context and baggage.
	Propagator propagation.TextMapPropagator
	// Logger receives a recovered panic with its stack; nil means
	// slog.Default().
	Logger *slog.Logger
	// Panicked counts a recovered panic (the daemon's
	// prefixroute_panics_recovered_total); nil counts nothing.
	Panicked func(context.Context)
}

// Route is one HTTP route of a front end for Wrap.
type Route struct {
	// Path is the route's path: the span is named "POST "+Path, and so is
	// the PickMeta.Method given to Serve.
	Path string
	// FullMethod is the gRPC method the request is authorized as
	// (pb.PickService_Pick_FullMethodName for a pick).
	FullMethod string
	// Serve answers an authorized request and returns the HTTP status it
	// wrote. ctx carries the span and the caller; meta is the PickMeta to
	// give PickFor.
	Serve func(ctx context.Context, w http.ResponseWriter, r *http.Request, meta PickMeta) int
	// Denied answers a request whose credentials authorize no call (a
	// gRPC status error: Unauthenticated or PermissionDenied) in the
	// route's own format and returns the HTTP status; nil means
	// WriteStatus.
	Denied func(w http.ResponseWriter, err error) int
}

// Wrap returns the handler of rt under h's authentication, panic recovery
// and span, as the gRPC middleware gives a gRPC call:
//
//   - the caller's trace context is extracted from the headers and the
//     server span "POST <path>" opened on it; its status is the HTTP
//     status written, an error for 5xx;
//   - the request is refused (h.Refused), or authorized as rt.FullMethod
//     (AuthorizeHTTP), else answered by rt.Denied;
//   - a panic in rt.Serve is logged with its stack, counted
//     (h.Panicked) and answered 500 with an Internal status (WriteStatus);
//     the server keeps serving;
//   - rt.Serve gets the PickMeta of the request: when it arrived, and
//     HTTPService and "POST <path>" for the failed-pick log line.
//
// The handler is safe for concurrent use.
func Wrap(h HTTP, rt Route) http.Handler {
	tp := h.Tracer
	if tp == nil {
		tp = tracenoop.NewTracerProvider()
	}
	w := &wrapped{h: h, rt: rt, method: "POST " + rt.Path,
		tracer: tp.Tracer("github.com/prefixroute/prefixroute/frontend")}
	if w.h.Propagator == nil {
		w.h.Propagator = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
	}
	if w.h.Logger == nil {
		w.h.Logger = slog.Default()
	}
	if w.rt.Denied == nil {
		w.rt.Denied = WriteStatus
	}
	return w
}

// wrapped is Wrap's handler.
type wrapped struct {
	h      HTTP
	rt     Route
	method string // "POST " + the path
	tracer trace.Tracer
}

func (wr *wrapped) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	ctx := wr.h.Propagator.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
	ctx, span := wr.tracer.Start(ctx, wr.method, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("http.request.method", r.Method), attribute.String("url.path", wr.rt.Path)))
	defer span.End()
	defer wr.recovered(ctx, w, span)
	endSpan(span, wr.serve(ctx, w, r, start))
}

// serve authorizes the request and serves it; it returns the HTTP status
// written.
func (wr *wrapped) serve(ctx context.Context, w http.ResponseWriter, r *http.Request, start time.Time) int {
	if wr.h.Refused != "" {
		return wr.rt.Denied(w, status.Error(codes.PermissionDenied, wr.h.Refused))
	}
	if wr.h.Auth == nil {
		if err := unauthenticatedCheck(r); err != nil {
			return wr.rt.Denied(w, status.Error(codes.PermissionDenied, err.Error()))
		}
	}
	ctx, err := authorizeHTTP(ctx, wr.h.Auth, r, wr.rt.FullMethod)
	if err != nil {
		return wr.rt.Denied(w, err)
	}
	return wr.rt.Serve(ctx, w, r, PickMeta{Start: start, Service: HTTPService, Method: wr.method})
}

// recovered, deferred by ServeHTTP, turns a panic into a logged error with
// the stack, a count and a 500 answer (on the span too), as the gRPC recovery interceptor
// does; the server keeps serving.
func (wr *wrapped) recovered(ctx context.Context, w http.ResponseWriter, span trace.Span) {
	v := recover()
	if v == nil {
		return
	}
	if wr.h.Panicked != nil {
		wr.h.Panicked(ctx)
	}
	wr.h.Logger.ErrorContext(ctx, "recovered from a panic in an HTTP pick handler; the request fails with 500, the server keeps serving",
		"path", wr.rt.Path, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
	endSpan(span, WriteStatus(w, status.Error(codes.Internal, "internal error: the router recovered from a panic while handling this request; its log has the details")))
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

// StatusError is a gRPC status answered with an HTTP status of its own
// rather than gateway.HTTPStatus's (413 for a body over the limit, say).
type StatusError struct {
	// Code is the HTTP status.
	Code int
	// Status is the gRPC status.
	Status *status.Status
}

// Error is the gRPC status's error text.
func (e *StatusError) Error() string { return e.Status.Err().Error() }

// GRPCStatus is the gRPC status, for status.Convert.
func (e *StatusError) GRPCStatus() *status.Status { return e.Status }

// WriteStatus answers a gRPC status error with its HTTP status
// (gateway.HTTPStatus, or a StatusError's own) and the google.rpc.Status
// in protobuf JSON, {"code": 5, "message": "..."}, and returns the HTTP
// status. A pool warming up (Unavailable with reason POOL_WARMING, in
// "details") adds Retry-After (gateway.ErrorFor).
func WriteStatus(w http.ResponseWriter, err error) int {
	st := status.Convert(err)
	code := gateway.HTTPStatus(st.Code())
	var se *StatusError
	if errors.As(err, &se) {
		code = se.Code
	}
	out, merr := protojson.Marshal(st.Proto())
	if merr != nil {
		out = []byte(`{"code":13,"message":"encoding the error failed"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	if code == http.StatusServiceUnavailable {
		gateway.ErrorFor(err).SetRetryAfter(w.Header().Set) // a pool warming up
	}
	w.WriteHeader(code)
	w.Write(out)
	return code
}
