package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/auth"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/logging"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/recovery"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/selector"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc/filters"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/frontend"
	"github.com/prefixroute/prefixroute/server"
)

// middleware returns the gRPC server options that wire the telemetry into
// every call, chained as go-grpc-middleware's example server does:
//
//   - otelgrpc as the stats handler: a server span per call (health checks
//     excluded), with the caller's W3C trace context as parent, and the
//     rpc.server.* metrics; wrapped in pickStack, which grows a Pick's
//     stack before the call starts;
//   - a count of the unary calls in flight (outermost), for Shutdown;
//   - logging, through log/slog, with the call's trace id (except Pick,
//     which PickFor records itself: see pickrecord.go);
//   - authentication and authorization (internal/auth), when authFn is not nil:
//     the go-grpc-middleware auth interceptor with the tokens file's roles;
//   - recovery (innermost but for test): a panic becomes codes.Internal, its
//     stack is logged, the server keeps serving.
//
// Request validation is not an interceptor here: no generated message has a
// Validate method (the protovalidate annotations need the Buf Schema
// Registry), so the handlers validate and answer InvalidArgument naming the
// field. test, when not nil, is chained innermost (tests inject panics).
func middleware(log *slog.Logger, tel *telemetry, srv *server.Server, calls *inflight, authFn auth.AuthFunc,
	test grpc.UnaryServerInterceptor) []grpc.ServerOption {
	rpcLog := interceptorLogger(log.With("component", "grpc"))
	logOpts := []logging.Option{logging.WithFieldsFromContext(logTraceID), logging.WithLevels(codeToLevel)}
	rec := recovery.WithRecoveryHandlerContext(recoveryHandler(log, srv))
	// A unary call logs one line when it finishes; a stream also when it
	// starts.
	unaryLogOpts := append(logOpts[:len(logOpts):len(logOpts)], logging.WithLogOnEvents(logging.FinishCall))
	// Pick is logged by PickFor, and only when it fails: the generic
	// interceptor costs ~70 allocations a call even below the log level,
	// which is most of the middleware's cost on the hot path.
	notPick := selector.MatchFunc(func(_ context.Context, c interceptors.CallMeta) bool {
		return c.FullMethod() != pb.PickService_Pick_FullMethodName
	})
	unary := []grpc.UnaryServerInterceptor{
		calls.unary,
		selector.UnaryServerInterceptor(logging.UnaryServerInterceptor(rpcLog, unaryLogOpts...), notPick),
	}
	stream := []grpc.StreamServerInterceptor{logging.StreamServerInterceptor(rpcLog, logOpts...)}
	if authFn != nil {
		unary = append(unary, auth.UnaryServerInterceptor(authFn))
		stream = append(stream, auth.StreamServerInterceptor(authFn))
	}
	unary = append(unary, recovery.UnaryServerInterceptor(rec))
	stream = append(stream, recovery.StreamServerInterceptor(rec))
	if test != nil {
		unary = append(unary, test)
	}
	return []grpc.ServerOption{
		grpc.StatsHandler(pickStack{otelgrpc.NewServerHandler(
			otelgrpc.WithTracerProvider(tel.tracer), otelgrpc.WithMeterProvider(tel.meter),
			otelgrpc.WithPropagators(tel.propagator), otelgrpc.WithFilter(filters.Not(filters.HealthCheck())))}),
		grpc.ChainUnaryInterceptor(unary...),
		grpc.ChainStreamInterceptor(stream...),
	}
}

// pickStack is the stats handler h that first grows the goroutine of a
// Pick to 16 KiB of stack, in one step: grpc-go runs every call on a new
// goroutine, whose small first stack a Pick (interceptors, handler,
// otelgrpc's attribute sets at the end) outgrew two or three times a call,
// each growth copying a deeper stack than the last (golang/go#18138);
// runtime.newstack was a quarter to a third of a Pick's daemon CPU beyond
// an empty call's (docs/history/benchmarks-2026-12-01-to-12-02.md, "Pick, fourth pass"). Growing here, a
// few frames deep, copies almost nothing. Other calls (report streams
// among them, which live long and would keep the larger stack) are left
// as they were.
type pickStack struct{ stats.Handler }

// TagRPC grows the stack of a Pick and calls h's TagRPC.
func (h pickStack) TagRPC(ctx context.Context, info *stats.RPCTagInfo) context.Context {
	if info.FullMethodName == pb.PickService_Pick_FullMethodName {
		growStack(0)
	}
	return h.Handler.TagRPC(ctx, info)
}

// pickStackBytes is the frame of growStack: the runtime then doubles the
// goroutine's stack to the 16 KiB a Pick needs (the last size its per-P
// stack caches serve).
const pickStackBytes = 12 << 10

// growStack has a frame of pickStackBytes, so that calling it grows the
// stack to fit; i (0) only keeps the compiler from dropping the array.
//
//go:noinline
func growStack(i int) byte {
	var b [pickStackBytes]byte
	b[i] = 1
	return b[i+1]
}

// interceptorLogger adapts a slog logger to the logging interceptor, as in
// go-grpc-middleware's example.
func interceptorLogger(l *slog.Logger) logging.Logger {
	return logging.LoggerFunc(func(ctx context.Context, lvl logging.Level, msg string, fields ...any) {
		l.Log(ctx, slog.Level(lvl), msg, fields...)
	})
}

// logTraceID puts the call's trace id on its log lines. Unlike the example
// it does not require the span to be sampled: the id a gateway propagated
// is worth logging even when this router does not export traces.
func logTraceID(ctx context.Context) logging.Fields {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		return logging.Fields{"trace_id", sc.TraceID().String()}
	}
	return nil
}

// codeToLevel is frontend.CodeLevel for the logging interceptor.
func codeToLevel(c codes.Code) logging.Level { return logging.Level(frontend.CodeLevel(c)) }

// recoveryHandler logs a handler's panic with its stack, counts it, and
// answers Internal without the panic's details.
func recoveryHandler(log *slog.Logger, srv *server.Server) recovery.RecoveryHandlerFuncContext {
	return func(ctx context.Context, p any) error {
		srv.Panicked(ctx)
		method, _ := grpc.Method(ctx)
		args := []any{"grpc.method", method, "panic", fmt.Sprint(p), "stack", string(debug.Stack())}
		if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
			args = append(args, "trace_id", sc.TraceID().String())
		}
		log.ErrorContext(ctx, "recovered from a panic in a gRPC handler; the call fails with Internal, the server keeps serving", args...)
		return status.Error(codes.Internal, "internal error: the router recovered from a panic while handling this call; its log has the details")
	}
}

// drainSettle is how long Shutdown waits with no unary call in flight
// before it ends the report streams: time for clients to act on the GOAWAY.
const drainSettle = 100 * time.Millisecond

// inflight counts the unary calls being handled. Safe for concurrent use.
type inflight struct{ n atomic.Int64 }

func (f *inflight) unary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	f.n.Add(1)
	defer f.n.Add(-1)
	return handler(ctx, req)
}

// idle returns once no call has been in flight for settle, or when ctx ends.
func (f *inflight) idle(ctx context.Context, settle time.Duration) {
	const poll = 5 * time.Millisecond
	t := time.NewTicker(poll)
	defer t.Stop()
	for quiet := time.Duration(0); quiet < settle; {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if f.n.Load() == 0 {
			quiet += poll
		} else {
			quiet = 0
		}
	}
}
