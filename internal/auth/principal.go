package auth

import (
	"context"
	"fmt"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
)

// Role is one permission of a principal; a principal holds a set of them
// (the roles are bits of one Role).
type Role uint8

// The roles of the tokens file. RoleOperator implies RoleOperatorRead.
const (
	// RoleGateway may call PickService.
	RoleGateway Role = 1 << iota
	// RoleInstance may call LoadService.ReportLoad, within its binding.
	RoleInstance
	// RoleOperatorRead may call the AdminService methods that only read
	// (the method table says which).
	RoleOperatorRead
	// RoleOperator may call every AdminService method.
	RoleOperator
)

// AnyRole is the requirement of the methods every authenticated principal
// may call, whatever its roles (server reflection).
const AnyRole Role = 0

type roleName struct {
	role Role
	name string
}

// roleNames are the spellings of the roles in the tokens file.
var roleNames = []roleName{{RoleGateway, "gateway"}, {RoleInstance, "instance"}, {RoleOperatorRead, "operator-read"}, {RoleOperator, "operator"}}

// String is the role's name in the tokens file; a set is its names joined
// by commas, and AnyRole is "none".
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

// Binding restricts what pools, deployments and instances an instance
// principal may report for. Empty fields do not restrict.
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

// Principal is one identity of the tokens file: a name, its roles and, for
// instances, an optional binding. Immutable once loaded; safe to share.
type Principal struct {
	Name  string
	Roles Role
	// Bind is nil for a principal that may report for any pool.
	Bind *Binding
	// Flow is nil for a principal whose picks may name any flow_id and
	// priority.
	Flow *FlowBinding

	viaToken, viaCert *Caller // precomputed context values
}

// Has reports whether the principal holds role (operator implies
// operator-read; AnyRole is held by every principal).
func (p *Principal) Has(role Role) bool {
	have := p.Roles
	if have&RoleOperator != 0 {
		have |= RoleOperatorRead
	}
	return have&role == role
}

// CheckReport refuses, with PermissionDenied, a load report for a pool,
// deployment or instance outside the principal's binding; nil when it has
// none. Empty fields of a stream's later reports mean "unchanged" and were
// checked on its first.
func (p *Principal) CheckReport(r *pb.ReportLoadRequest) error {
	b := p.Bind
	if b == nil {
		return nil
	}
	bad := func(field, got string) error {
		return status.Errorf(codes.PermissionDenied, "identity %q is bound to %s; this stream reports %s %q",
			p.Name, b, field, got)
	}
	switch {
	case r.GetPool() != "" && r.GetPool() != b.Pool:
		return bad("pool", r.GetPool())
	case b.Deployment != "" && r.GetDeployment() != "" && r.GetDeployment() != b.Deployment:
		return bad("deployment", r.GetDeployment())
	case b.Instance != "" && r.GetInstanceId() != "" && r.GetInstanceId() != b.Instance:
		return bad("instance_id", r.GetInstanceId())
	}
	return nil
}

// Covers reports whether the principal's binding covers an instance that
// lives in pool, deployment under id instance: true without a binding.
// A report stream may take over (replace, or move to another deployment)
// only an instance its principal covers where the instance lives now.
func (p *Principal) Covers(pool, deployment, instance string) bool {
	b := p.Bind
	return b == nil || (b.Pool == pool && (b.Deployment == "" || b.Deployment == deployment) &&
		(b.Instance == "" || b.Instance == instance))
}

// Caller is the authenticated caller of one call: a principal and how it
// proved itself. It travels in the call's context (CallerFrom). Immutable.
type Caller struct {
	*Principal
	// Via is "token" (a bearer token) or "cert" (a verified client
	// certificate).
	Via string
}

type callerKey struct{}

// CallerFrom returns the call's authenticated caller, or nil when the call
// was not authenticated (authentication off, or an open method).
func CallerFrom(ctx context.Context) *Caller {
	c, _ := ctx.Value(callerKey{}).(*Caller)
	return c
}
