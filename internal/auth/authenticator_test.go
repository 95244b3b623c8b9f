package auth

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"io"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// authTokens is the tokens file of the Authorize tests.
func authTokens() string {
	return "identities:\n" +
		"  - {name: gw, roles: gateway, token_sha256: " + HashToken("token-of-gw-0123456") + "}\n" +
		"  - {name: reader, roles: operator-read, token_sha256: " + HashToken("token-of-reader-0123") + "}\n" +
		"  - {name: ops, roles: operator, token_sha256: " + HashToken("token-of-ops-0123456") + "}\n" +
		"  - {name: chat-a, roles: instance, token_sha256: " + HashToken("token-of-chat-a-0123") + ", bind: {pool: chat, deployment: a}}\n" +
		"  - {name: alice, roles: operator, cert: dns:alice.ops.test}\n" +
		"  - {name: fleet-b, roles: instance, cert: 'uri:spiffe://fleet/chat/b'}\n"
}

// newTestAuthenticator loads authTokens from a temp file.
func newTestAuthenticator(t testing.TB) *Authenticator {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tokens.yaml")
	if err := os.WriteFile(path, []byte(authTokens()), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := NewAuthenticator(path, time.Hour, quiet)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// callCtx is the incoming context of a call with the given authorization
// header ("" none) over TLS with the given verified client certificate
// (nil none).
func callCtx(authz string, cert *x509.Certificate) context.Context {
	ctx := context.Background()
	if authz != "" {
		ctx = metadata.NewIncomingContext(ctx, metadata.Pairs("authorization", authz))
	}
	info := credentials.TLSInfo{}
	if cert != nil {
		info.State = tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{cert}}}
	}
	return peer.NewContext(ctx, &peer.Peer{AuthInfo: info})
}

// TestAuthorize runs Authorize on every kind of credential against
// methods of each rule.
func TestAuthorize(t *testing.T) {
	a := newTestAuthenticator(t)
	alice := &x509.Certificate{Subject: pkix.Name{CommonName: "Alice"}, DNSNames: []string{"ALICE.ops.test"}}
	fleetURI, _ := url.Parse("spiffe://fleet/chat/b")
	both := &x509.Certificate{DNSNames: []string{"alice.ops.test"}, URIs: []*url.URL{fleetURI}}
	stranger := &x509.Certificate{Subject: pkix.Name{CommonName: "stranger"}}
	const (
		pick   = pb.PickService_Pick_FullMethodName
		report = pb.LoadService_ReportLoad_FullMethodName
		get    = pb.AdminService_GetWeights_FullMethodName
		set    = pb.AdminService_SetWeights_FullMethodName
		health = "/grpc.health.v1.Health/Check"
		refl   = "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo"
	)
	tests := []struct {
		name, authz string
		cert        *x509.Certificate
		method      string
		code        codes.Code
		msg         string // the whole message, or for OK the caller "name via"
	}{
		{"no credentials", "", nil, pick, codes.Unauthenticated,
			`no credentials: send metadata "authorization: Bearer <token>" or a client certificate (see SECURITY.md)`},
		{"malformed header", "Basic dXNlcg==", nil, pick, codes.Unauthenticated, `authorization header is not "Bearer <token>"`},
		{"unknown token", "Bearer not-a-token-at-all", nil, pick, codes.Unauthenticated,
			"bearer token not recognised: its SHA-256 is in no identity of the tokens file"},
		{"gateway picks", "Bearer token-of-gw-0123456", nil, pick, codes.OK, "gw via token"},
		{"gateway sets", "bearer token-of-gw-0123456", nil, set, codes.PermissionDenied,
			`identity "gw" (token) has role gateway; ` + set + " needs role operator"},
		{"reader gets", "Bearer token-of-reader-0123", nil, get, codes.OK, "reader via token"},
		{"reader sets", "Bearer token-of-reader-0123", nil, set, codes.PermissionDenied,
			`identity "reader" (token) has role operator-read; ` + set + " needs role operator"},
		{"operator gets", "Bearer token-of-ops-0123456", nil, get, codes.OK, "ops via token"},
		{"instance reports", "Bearer token-of-chat-a-0123", nil, report, codes.OK, "chat-a via token"},
		{"cert operator", "", alice, set, codes.OK, "alice via cert"},
		{"cert wrong role", "", alice, pick, codes.PermissionDenied, `identity "alice" (cert) has role operator; ` + pick + " needs role gateway"},
		{"cert two identities", "", both, get, codes.PermissionDenied,
			`client certificate proves two identities, "alice" and "fleet-b"; give each certificate one`},
		{"cert no identity", "", stranger, get, codes.PermissionDenied,
			"client certificate [cn:stranger] is trusted but maps to no identity of the tokens file"},
		{"token decides over cert", "Bearer token-of-gw-0123456", alice, set, codes.PermissionDenied, `identity "gw" (token) has role gateway; ` + set + " needs role operator"},
		{"bad token with good cert", "Bearer nope-nope-nope-nope", alice, set, codes.Unauthenticated,
			"bearer token not recognised: its SHA-256 is in no identity of the tokens file"},
		{"health open", "", nil, health, codes.OK, ""},
		{"health open, bad token ignored", "Bearer nope-nope-nope-nope", nil, health, codes.OK, ""},
		{"reflection needs an identity", "", nil, refl, codes.Unauthenticated, "no credentials: "},
		{"reflection any identity", "Bearer token-of-chat-a-0123", nil, refl, codes.OK, "chat-a via token"},
		{"unknown method", "Bearer token-of-ops-0123456", nil, "/prefixroute.v1.AdminService/DropEverything", codes.PermissionDenied,
			"/prefixroute.v1.AdminService/DropEverything is not in the authorization table; nobody may call it"},
		{"unknown method, no credentials", "", nil, "/x.Y/Z", codes.Unauthenticated, "no credentials: "},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, err := a.Authorize(callCtx(tc.authz, tc.cert), tc.method)
			if got := status.Code(err); got != tc.code {
				t.Fatalf("code %v (%v), want %v", got, err, tc.code)
			}
			if err != nil {
				if msg := status.Convert(err).Message(); !strings.HasPrefix(msg, tc.msg) {
					t.Fatalf("message %q, want %q", msg, tc.msg)
				}
				return
			}
			c := CallerFrom(ctx)
			switch {
			case tc.msg == "" && c != nil:
				t.Errorf("open method carries caller %q", c.Name)
			case tc.msg != "" && (c == nil || c.Name+" via "+c.Via != tc.msg):
				t.Errorf("caller %+v, want %s", c, tc.msg)
			}
		})
	}
}

// TestAuthorizeKeepsBinding: the caller in the context carries its
// principal's binding, which the report stream checks.
func TestAuthorizeKeepsBinding(t *testing.T) {
	a := newTestAuthenticator(t)
	ctx, err := a.Authorize(callCtx("Bearer token-of-chat-a-0123", nil), pb.LoadService_ReportLoad_FullMethodName)
	if err != nil {
		t.Fatal(err)
	}
	c := CallerFrom(ctx)
	if c == nil || c.Bind == nil || *c.Bind != (Binding{Pool: "chat", Deployment: "a"}) {
		t.Fatalf("caller %+v", c)
	}
	if err := c.CheckReport(&pb.ReportLoadRequest{Pool: "chat", Deployment: "b"}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("report outside the binding: %v", err)
	}
}

// TestAuthorizeAllocations: an authorized Pick allocates 3 times (the two
// reads of the authorization header and the context that carries the
// caller; the caller itself is precomputed), under -race too.
func TestAuthorizeAllocations(t *testing.T) {
	a := newTestAuthenticator(t)
	ctx := callCtx("Bearer token-of-gw-0123456", nil)
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := a.Authorize(ctx, pb.PickService_Pick_FullMethodName); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 3 {
		t.Errorf("%.0f allocations per authorized call, want at most 3", allocs)
	}
}
