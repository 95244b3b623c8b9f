package auth

import (
	"context"
	"crypto/x509"
	"log/slog"
	"time"

	grpcauth "github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/auth"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// Authenticator authenticates every call against a tokens file, kept
// loaded (reloaded when it changes), and authorizes it by the method
// table. Safe for concurrent use.
type Authenticator struct {
	r *reloader[table]
}

// NewAuthenticator loads the tokens file at path, which it checks for a
// change at most every reload (DefaultReloadInterval when not positive),
// logging reloads on log. The first load must succeed: its error names the
// file and the identity at fault.
func NewAuthenticator(path string, reload time.Duration, log *slog.Logger) (*Authenticator, error) {
	r, err := newReloader("tokens file", []string{path}, reload, log, func() (*table, error) { return loadTokensFile(path) })
	if err != nil {
		return nil, err
	}
	return &Authenticator{r: r}, nil
}

// ReloadStats counts the checks and reloads of the tokens file.
func (a *Authenticator) ReloadStats() ReloadStats { return a.r.stats() }

// Authorize decides whether the call in ctx may run method (its full name):
// an open method runs unauthenticated; otherwise the caller is
// authenticated (bearer token, else verified client certificate) and must
// hold the role the method table asks for, and the returned context
// carries it (CallerFrom). The error is a status: Unauthenticated for
// missing or unknown credentials, PermissionDenied for a principal without
// the role, a certificate that maps to no principal, or a method not in
// the table.
func (a *Authenticator) Authorize(ctx context.Context, method string) (context.Context, error) {
	rule, known := RuleFor(method)
	if rule.Open {
		return ctx, nil
	}
	c, err := a.authenticate(ctx)
	if err != nil {
		return nil, err
	}
	if !known {
		return nil, status.Errorf(codes.PermissionDenied, "%s is not in the authorization table; nobody may call it", method)
	}
	if !c.Has(rule.Role) {
		return nil, status.Errorf(codes.PermissionDenied, "identity %q (%s) has role %s; %s needs role %s",
			c.Name, c.Via, c.Roles, method, rule.Role)
	}
	return context.WithValue(ctx, callerKey{}, c), nil
}

// authenticate finds the caller: the bearer token when the call carries an
// authorization header (which must then be valid), else the verified
// client certificate.
func (a *Authenticator) authenticate(ctx context.Context) (*Caller, error) {
	t := a.r.get()
	if len(metadata.ValueFromIncomingContext(ctx, "authorization")) > 0 {
		token, err := grpcauth.AuthFromMD(ctx, "bearer")
		if err != nil {
			return nil, status.Error(codes.Unauthenticated, "authorization header is not \"Bearer <token>\"")
		}
		if p := t.byToken(token); p != nil {
			return p.viaToken, nil
		}
		return nil, status.Error(codes.Unauthenticated, "bearer token not recognised: its SHA-256 is in no identity of the tokens file")
	}
	if leaf := verifiedLeaf(ctx); leaf != nil {
		p, err := t.byCert(leaf)
		if err != nil {
			return nil, status.Error(codes.PermissionDenied, err.Error())
		}
		return p.viaCert, nil
	}
	return nil, status.Error(codes.Unauthenticated,
		"no credentials: send metadata \"authorization: Bearer <token>\" or a client certificate (see SECURITY.md)")
}

// verifiedLeaf returns the call's client certificate when the TLS handshake
// verified it against the client CA, else nil.
func verifiedLeaf(ctx context.Context) *x509.Certificate {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return nil
	}
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(info.State.VerifiedChains) == 0 || len(info.State.VerifiedChains[0]) == 0 {
		return nil
	}
	return info.State.VerifiedChains[0][0]
}
