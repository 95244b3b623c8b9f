package client

import (
	"context"
	"errors"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// Connection defaults of Dial.
const (
	// DefaultAddr is where a sidecar serves gRPC when its --listen is not
	// set: loopback port 50051 (daemon.DefaultListen is this constant).
	DefaultAddr = "127.0.0.1:50051"
	// KeepaliveTime is how long a connection may sit without traffic before
	// the client pings the sidecar: 10s, the shortest gRPC-Go allows (the
	// sidecar accepts pings every 5s or more, streams open or not).
	KeepaliveTime = 10 * time.Second
	// KeepaliveTimeout is how long the client waits for a ping's answer
	// before it considers the connection dead: 5s.
	KeepaliveTimeout = 5 * time.Second
	// ReconnectBaseDelay and ReconnectMaxDelay bound the connection's own
	// reconnect backoff (100ms doubling to 1s, 20% jitter), instead of
	// gRPC's default of 1s growing to 120s, so that a restarted sidecar is
	// reached again within about 1 s of being back however long it was
	// down (it was 10 s: a 3 s outage could take 6 s to notice). A refused
	// connection attempt a second costs the sidecar nothing.
	ReconnectBaseDelay = 100 * time.Millisecond
	ReconnectMaxDelay  = time.Second
)

// Dial returns a client connection to the sidecar at target (host:port, or
// any gRPC target such as "dns:///prefixroute:50051" or "unix:///run/pr.sock")
// with the settings gateways and instances want:
//
//   - plaintext (the sidecar listens on loopback or a private network; use
//     DialWith for TLS and a bearer token, or pass
//     grpc.WithTransportCredentials in extra);
//   - keepalive pings after KeepaliveTime without traffic, streams open or
//     not, so a dead sidecar is noticed within KeepaliveTime+KeepaliveTimeout;
//   - reconnect backoff from ReconnectBaseDelay to ReconnectMaxDelay;
//   - static HTTP/2 windows of 1 MiB per stream and 16 MiB per connection
//     (no BDP pings after every small message);
//   - a unary interceptor that marks errors of the transport (see
//     Unreachable), so callers can tell "the sidecar could not be reached"
//     from "the sidecar said no".
//
// The connection starts connecting at once. Options in extra come last and
// override these. Share one connection between every Picker and Reporter of
// a process: a grpc.ClientConn is safe for concurrent use and multiplexes
// calls and streams. Close it when done.
func Dial(target string, extra ...grpc.DialOption) (*grpc.ClientConn, error) {
	opts := []grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{
			Time: KeepaliveTime, Timeout: KeepaliveTimeout, PermitWithoutStream: true,
		}),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff: backoff.Config{
				BaseDelay: ReconnectBaseDelay, Multiplier: 2, Jitter: 0.2, MaxDelay: ReconnectMaxDelay,
			},
			MinConnectTimeout: 5 * time.Second,
		}),
		grpc.WithChainUnaryInterceptor(markUnreachable),
		// Static windows (the sidecar's, daemon.StreamWindowBytes and
		// ConnWindowBytes): the dynamic window pings the sidecar after
		// nearly every ack or Pick answer, which costs both sides a
		// write and a read each.
		grpc.WithStaticStreamWindowSize(1 << 20),
		grpc.WithStaticConnWindowSize(16 << 20),
	}
	cc, err := grpc.NewClient(target, append(opts, extra...)...)
	if err != nil {
		return nil, err
	}
	cc.Connect()
	return cc, nil
}

// UnreachableError is a call's error when the sidecar could not be reached
// or did not answer in time, as opposed to an error status the sidecar
// returned. It carries the gRPC status (Unavailable or DeadlineExceeded), so
// status.FromError and status.Code see through it.
type UnreachableError struct {
	st *status.Status
}

// Error returns the status's error text.
func (e *UnreachableError) Error() string { return e.st.Err().Error() }

// GRPCStatus returns the call's status.
func (e *UnreachableError) GRPCStatus() *status.Status { return e.st }

// Unreachable reports whether err means that the sidecar could not be
// reached or did not answer in time: an UnreachableError (from a call on a
// connection made by Dial, or from Picker.Pick on any connection), or a
// deadline. An Unavailable status the sidecar itself returned (for example
// "pool has no eligible instance") is not unreachable: the sidecar answered.
//
// Errors of calls on connections not made by Dial carry no mark outside
// Pick; for those, Unreachable judges by the code alone and treats every
// Unavailable and DeadlineExceeded as unreachable.
func Unreachable(err error) bool {
	if err == nil {
		return false
	}
	var ue *UnreachableError
	if errors.As(err, &ue) {
		return true
	}
	var se *serverError
	if errors.As(err, &se) {
		return false
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	switch status.Code(err) {
	case codes.DeadlineExceeded, codes.Unavailable:
		return true
	}
	return false
}

// serverError marks an error status that the sidecar itself sent, so that
// Unreachable can tell it from a transport error of the same code.
type serverError struct {
	st *status.Status
}

func (e *serverError) Error() string              { return e.st.Err().Error() }
func (e *serverError) GRPCStatus() *status.Status { return e.st }

// marked reports whether err went through classify.
func marked(err error) bool {
	var se *serverError
	var ue *UnreachableError
	return errors.As(err, &se) || errors.As(err, &ue)
}

// classify marks err by where it came from. A status the server sent arrives
// in trailers, which always hold at least content-type; a status the client
// made up after a transport failure or a deadline comes with none.
func classify(err error, trailer metadata.MD) error {
	if err == nil || marked(err) {
		return err
	}
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	switch {
	case st.Code() == codes.DeadlineExceeded:
		return &UnreachableError{st: st}
	case st.Code() == codes.Unavailable && len(trailer) == 0:
		return &UnreachableError{st: st}
	case len(trailer) > 0:
		return &serverError{st: st}
	}
	return err
}

// markUnreachable is the unary interceptor of Dial: it runs the call with a
// trailer capture and classifies its error.
func markUnreachable(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn,
	invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	var trailer metadata.MD
	err := invoker(ctx, method, req, reply, cc, append(opts, grpc.Trailer(&trailer))...)
	return classify(err, trailer)
}
