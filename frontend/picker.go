package frontend

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"time"

	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
)

// Picker is the router as every front end sees it: *server.Server. All
// methods are safe for concurrent use.
type Picker interface {
	// PickFor decides and records one pick as a gRPC Pick is decided and
	// recorded (metrics, span, decision log, failed-pick log line). The
	// error is a gRPC status.
	PickFor(ctx context.Context, req *pb.PickRequest, meta PickMeta) (*pb.PickResponse, error)
	// BlockSize is a pool's block_size_tokens, 0 when unknown (the
	// caller's default applies).
	BlockSize(pool string) int
	// Endpoints appends a pool's instances, in snapshot order, to dst (for
	// subset hints). The error is a gRPC status (NotFound for an unknown
	// pool).
	Endpoints(pool string, dst []Endpoint) ([]Endpoint, error)
	// MaxExcludes is the most exclude_instances (plus load-snapshot
	// entries) a pick may carry.
	MaxExcludes() int
	// RecordServed writes to the decision log, when there is one, that the
	// gateway served the request on served, not on chosen, the endpoint
	// its pick returned.
	RecordServed(ctx context.Context, pool, requestID, chosen, served string)
}

// Endpoint is one instance of a pool by id and address.
type Endpoint struct{ Instance, Address string }

// PickMeta is what a front end knows of a Pick besides the request itself.
// The request id travels in PickRequest.RequestId; the caller's trace
// context in the ctx given to PickFor (a front end extracts it with its
// propagator and, when it traces, opens its server span on ctx: PickFor puts
// the decision on the span it finds there).
type PickMeta struct {
	// Start is when the front end received the request, the start of the
	// latency it records; zero means when PickFor is called.
	Start time.Time
	// Trace is the caller's trace context for a front end that opens no
	// span: it names the trace in the decision log and in the failed-pick
	// log line when ctx carries no valid span context. Optional.
	Trace trace.SpanContext
	// Service and Method name the front end in the failed-pick log line
	// (grpc.service, grpc.method); empty means PickService and "Pick".
	Service, Method string
}

// Authorizer decides whether a call may run: *auth.Authenticator, which
// authenticates the caller by the tokens file and authorizes fullMethod
// by its table. Authorize returns the context the call runs with (carrying
// the caller, auth.CallerFrom) or a gRPC status error (Unauthenticated,
// PermissionDenied). Implementations are safe for concurrent use.
type Authorizer interface {
	Authorize(ctx context.Context, fullMethod string) (context.Context, error)
}

// AuthorizeHTTP authorizes an HTTP request as a call of the gRPC method
// fullMethod: it gives the request what a gRPC call carries (the peer with
// its address, for the audit log, and its verified client certificate; the
// Authorization header as metadata) and asks a. A nil a (authentication
// off) allows everything. The context returned carries the peer and, when
// authorized, the caller.
func AuthorizeHTTP(a Authorizer, r *http.Request, fullMethod string) (context.Context, error) {
	return authorizeHTTP(r.Context(), a, r, fullMethod)
}

// authorizeHTTP is AuthorizeHTTP from ctx (which carries a span) rather
// than the request's own context.
func authorizeHTTP(ctx context.Context, a Authorizer, r *http.Request, fullMethod string) (context.Context, error) {
	p := &peer.Peer{Addr: remoteAddr(r.RemoteAddr)}
	if r.TLS != nil {
		p.AuthInfo = credentials.TLSInfo{State: *r.TLS}
	}
	ctx = peer.NewContext(ctx, p)
	if a == nil {
		return ctx, nil
	}
	if vs := r.Header.Values("Authorization"); len(vs) > 0 {
		ctx = metadata.NewIncomingContext(ctx, metadata.MD{"authorization": vs})
	}
	return a.Authorize(ctx, fullMethod)
}

// remoteAddr is an http.Request's RemoteAddr as a net.Addr (an empty
// TCPAddr when it does not parse).
func remoteAddr(s string) net.Addr {
	ap, err := netip.ParseAddrPort(s)
	if err != nil {
		return &net.TCPAddr{}
	}
	return net.TCPAddrFromAddrPort(ap)
}

// CodeLevel is the level a call's log line has by its gRPC code, for every
// front end and the daemon's gRPC logging: successful calls at debug (a
// gateway picks thousands of times a second), client-side and availability
// errors at info, and server faults at error.
func CodeLevel(c codes.Code) slog.Level {
	switch c {
	case codes.OK, codes.Canceled:
		return slog.LevelDebug
	case codes.Unknown, codes.Internal, codes.DataLoss, codes.Unimplemented:
		return slog.LevelError
	}
	return slog.LevelInfo
}
