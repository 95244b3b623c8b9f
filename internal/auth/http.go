package auth

import (
	"context"
	"crypto/tls"
	"net/http"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
)

// HTTPContext returns ctx carrying an HTTP request's credentials as
// Authorize reads a gRPC call's: its Authorization header as the call's
// "authorization" metadata, and its TLS state (nil: plaintext) as the
// peer's, so that a verified client certificate proves an identity as it
// does on the gRPC listener. An HTTP front end of a gRPC method (the
// daemon's POST /v1/pick and /v1/route, authorized as PickService.Pick)
// calls Authorize with it: one authentication path for both listeners.
func HTTPContext(ctx context.Context, h http.Header, cs *tls.ConnectionState) context.Context {
	md := metadata.MD{}
	if v := h.Values("Authorization"); len(v) > 0 {
		md["authorization"] = v
	}
	ctx = metadata.NewIncomingContext(ctx, md)
	p := &peer.Peer{}
	if cs != nil {
		p.AuthInfo = credentials.TLSInfo{State: *cs}
	}
	return peer.NewContext(ctx, p)
}
