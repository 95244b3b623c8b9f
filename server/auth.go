package server

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/auth"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
)

// Role is one permission of an identity; an identity holds a set of them.
type Role uint8

// The roles of the tokens file. RoleOperator implies RoleOperatorRead.
const (
	// RoleGateway may call PickService.
	RoleGateway Role = 1 << iota
	// RoleInstance may call LoadService.ReportLoad, within its binding.
	RoleInstance
	// RoleOperatorRead may call the AdminService methods named Get* and
	// List*.
	RoleOperatorRead
	// RoleOperator may call every AdminService method, Set* included.
	RoleOperator
)

type roleName struct {
	role Role
	name string
}

// roleNames are the spellings of the roles in the tokens file.
var roleNames = []roleName{{RoleGateway, "gateway"}, {RoleInstance, "instance"}, {RoleOperatorRead, "operator-read"}, {RoleOperator, "operator"}}

// String is the role's name in the tokens file.
func (r Role) String() string {
	var parts []string
	for _, n := range roleNames {
		if r&n.role != 0 {
			parts = append(parts, n.name)
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ",")
}

// anyRole is the requirement of the methods every authenticated identity may
// call (server reflection).
const anyRole Role = 0

// HashToken returns the lowercase hex SHA-256 of a bearer token: what the
// tokens file stores instead of the token. Safe for concurrent use.
func HashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// Binding restricts what pools, deployments and instances an instance
// identity may report for. Empty fields do not restrict.
type Binding struct {
	Pool, Deployment, Instance string
}

// String is the binding as the PermissionDenied message names it.
func (b Binding) String() string {
	s := fmt.Sprintf("pool %q", b.Pool)
	if b.Deployment != "" {
		s += fmt.Sprintf(" deployment %q", b.Deployment)
	}
	if b.Instance != "" {
		s += fmt.Sprintf(" instance_id %q", b.Instance)
	}
	return s
}

// Identity is one entry of the tokens file: a name, its roles and, for
// instances, an optional binding. Immutable once loaded; safe to share.
type Identity struct {
	Name  string
	Roles Role
	// Bind is nil for an identity that may report for any pool.
	Bind *Binding

	viaToken, viaCert *principal // precomputed context values
}

// may reports whether the identity holds role (operator implies
// operator-read; anyRole is held by every identity).
func (id *Identity) may(role Role) bool {
	have := id.Roles
	if have&RoleOperator != 0 {
		have |= RoleOperatorRead
	}
	return have&role == role
}

// principal is the authenticated caller of one call: an identity and how it
// was proved. It travels in the call's context.
type principal struct {
	id  *Identity
	via string // "token" or "cert"
}

type principalKey struct{}

// principalFrom returns the call's authenticated caller, or nil when
// authentication is off.
func principalFrom(ctx context.Context) *principal {
	p, _ := ctx.Value(principalKey{}).(*principal)
	return p
}

// requiredRole says who may call a method: open methods need nobody, others
// need the role returned. Unknown methods are refused.
func requiredRole(method string) (role Role, open, known bool) {
	switch {
	case method == pb.PickService_Pick_FullMethodName:
		return RoleGateway, false, true
	case method == pb.LoadService_ReportLoad_FullMethodName:
		return RoleInstance, false, true
	case strings.HasPrefix(method, "/"+pb.AdminService_ServiceDesc.ServiceName+"/"):
		name := method[len(pb.AdminService_ServiceDesc.ServiceName)+2:]
		if strings.HasPrefix(name, "Get") || strings.HasPrefix(name, "List") {
			return RoleOperatorRead, false, true
		}
		return RoleOperator, false, true
	case strings.HasPrefix(method, "/grpc.health.v1.Health/"):
		return 0, true, true
	case strings.HasPrefix(method, "/grpc.reflection.v1.ServerReflection/"),
		strings.HasPrefix(method, "/grpc.reflection.v1alpha.ServerReflection/"):
		return anyRole, false, true
	}
	return 0, false, false
}

// authenticator checks every call against the tokens file. Safe for
// concurrent use.
type authenticator struct {
	table func() *authTable // the tokens file in force (reloaded on change)
}

// authFunc is the go-grpc-middleware auth function: it authenticates the
// caller (bearer token, else verified client certificate), checks the role
// the method needs and puts the caller in the context for the handlers and
// the audit log.
func (a *authenticator) authFunc(ctx context.Context) (context.Context, error) {
	method, _ := grpc.Method(ctx)
	role, open, known := requiredRole(method)
	if open {
		return ctx, nil
	}
	p, err := a.authenticate(ctx)
	if err != nil {
		return nil, err
	}
	if !known {
		return nil, status.Errorf(codes.PermissionDenied, "%s is not in the authorization table; nobody may call it", method)
	}
	if !p.id.may(role) {
		return nil, status.Errorf(codes.PermissionDenied, "identity %q (%s) has role %s; %s needs role %s",
			p.id.Name, p.via, p.id.Roles, method, role)
	}
	return context.WithValue(ctx, principalKey{}, p), nil
}

// authenticate finds the caller's identity: the bearer token when the call
// carries an authorization header (which must then be valid), else the
// verified client certificate.
func (a *authenticator) authenticate(ctx context.Context) (*principal, error) {
	t := a.table()
	if len(metadata.ValueFromIncomingContext(ctx, "authorization")) > 0 {
		token, err := auth.AuthFromMD(ctx, "bearer")
		if err != nil {
			return nil, status.Error(codes.Unauthenticated, "authorization header is not \"Bearer <token>\"")
		}
		if id := t.byToken(token); id != nil {
			return id.viaToken, nil
		}
		return nil, status.Error(codes.Unauthenticated, "bearer token not recognised: its SHA-256 is in no identity of the tokens file")
	}
	if leaf := verifiedLeaf(ctx); leaf != nil {
		id, err := t.byCert(leaf)
		if err != nil {
			return nil, status.Error(codes.PermissionDenied, err.Error())
		}
		return id.viaCert, nil
	}
	return nil, status.Error(codes.Unauthenticated,
		"no credentials: send metadata \"authorization: Bearer <token>\" or a client certificate (see SECURITY.md)")
}

// byToken returns the identity whose token hash is the token's, or nil. The
// map is keyed by the SHA-256 of the secret, which a caller cannot steer, so
// the lookup leaks nothing useful; the hit is confirmed in constant time.
func (t *authTable) byToken(token string) *Identity {
	sum := sha256.Sum256([]byte(token))
	e, ok := t.tokens[sum]
	if !ok || subtle.ConstantTimeCompare(e.hash[:], sum[:]) != 1 {
		return nil
	}
	return e.id
}

// verifiedLeaf returns the call's client certificate when the TLS handshake
// verified it against --tls-client-ca, else nil.
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
