package auth

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"net/http"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
)

// TestHTTPContext: an HTTP request's Authorization header and verified
// client certificate authorize exactly as the same credentials on a gRPC
// call do.
func TestHTTPContext(t *testing.T) {
	a := newTestAuthenticator(t)
	gwCert := &x509.Certificate{Subject: pkix.Name{CommonName: "Alice"}, DNSNames: []string{"alice.ops.test"}}
	verified := &tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{gwCert}}}
	const pick = pb.PickService_Pick_FullMethodName
	for _, tc := range []struct {
		name   string
		authz  []string
		tls    *tls.ConnectionState
		method string
		code   codes.Code
		caller string
	}{
		{"no credentials", nil, nil, pick, codes.Unauthenticated, ""},
		{"gateway token", []string{"Bearer token-of-gw-0123456"}, nil, pick, codes.OK, "gw"},
		{"lower-case scheme", []string{"bearer token-of-gw-0123456"}, nil, pick, codes.OK, "gw"},
		{"wrong role", []string{"Bearer token-of-reader-0123"}, nil, pick, codes.PermissionDenied, ""},
		{"unknown token", []string{"Bearer nope-nope-nope-nope"}, nil, pick, codes.Unauthenticated, ""},
		{"basic auth", []string{"Basic dXNlcg=="}, nil, pick, codes.Unauthenticated, ""},
		{"TLS without a client certificate", nil, &tls.ConnectionState{}, pick, codes.Unauthenticated, ""},
		{"verified certificate", nil, verified, pb.AdminService_SetWeights_FullMethodName, codes.OK, "alice"},
		{"certificate without the role", nil, verified, pick, codes.PermissionDenied, ""},
		{"bad token wins over a good certificate", []string{"Bearer nope-nope-nope-nope"}, verified,
			pb.AdminService_SetWeights_FullMethodName, codes.Unauthenticated, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			for _, v := range tc.authz {
				h.Add("Authorization", v)
			}
			ctx, err := a.Authorize(HTTPContext(context.Background(), h, tc.tls), tc.method)
			if got := status.Code(err); got != tc.code {
				t.Fatalf("code %v (%v), want %v", got, err, tc.code)
			}
			if err == nil {
				if c := CallerFrom(ctx); c == nil || c.Name != tc.caller {
					t.Fatalf("caller %+v, want %q", c, tc.caller)
				}
			}
		})
	}
}
