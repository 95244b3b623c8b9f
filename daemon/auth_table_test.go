package daemon

import (
	"context"
	"sort"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/prefixroute/prefixroute/internal/auth"
)

// registeredMethods are the full names of every method a started daemon
// serves, sorted.
func registeredMethods(d *Daemon) []string {
	var out []string
	for svc, info := range d.grpc.GetServiceInfo() {
		for _, m := range info.Methods {
			out = append(out, "/"+svc+"/"+m.Name)
		}
	}
	sort.Strings(out)
	return out
}

// TestAuthTableCoversEveryMethod walks the services a started daemon
// registered: every method must have a line in the authorization table,
// so a new RPC without a role fails here (and is refused to everybody
// until it has one).
func TestAuthTableCoversEveryMethod(t *testing.T) {
	e := startSecure(t, nil)
	methods := registeredMethods(e.d)
	if len(methods) < 17 {
		t.Fatalf("only %d methods registered: %q", len(methods), methods)
	}
	for _, m := range methods {
		if _, ok := auth.RuleFor(m); !ok {
			t.Errorf("%s has no rule in the authorization table (internal/auth methods.go)", m)
		}
	}
}

// rawCall calls any method with an empty message, as a stream (which a
// unary method serves too), and returns the first reply's error: what the
// interceptors and the handler made of the call.
func rawCall(ctx context.Context, cc *grpc.ClientConn, method string) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // ends server streams such as Health.Watch
	st, err := cc.NewStream(ctx, &grpc.StreamDesc{ClientStreams: true, ServerStreams: true}, method)
	if err != nil {
		return err
	}
	if err := st.SendMsg(&emptypb.Empty{}); err == nil {
		st.CloseSend()
	}
	return st.RecvMsg(&emptypb.Empty{})
}

// TestAuthEveryMethodEnforced calls every registered method over real
// loopback gRPC twice: as an identity without the role the table names,
// refused with PermissionDenied (Unauthenticated without credentials where
// any identity will do), and as one with it, which gets past
// authorization to the handler (whose answer to an empty request is not
// an auth error). Open methods get through without credentials.
func TestAuthEveryMethodEnforced(t *testing.T) {
	e := startSecure(t, nil)
	cc := e.dial("")
	holder := map[auth.Role]struct{ with, without string }{
		auth.RoleGateway:      {"gw", "inst"},
		auth.RoleInstance:     {"inst", "gw"},
		auth.RoleOperatorRead: {"reader", "gw"},
		auth.RoleOperator:     {"ops", "reader"},
		auth.AnyRole:          {"gw", ""},
	}
	for _, m := range registeredMethods(e.d) {
		t.Run(strings.TrimPrefix(m, "/"), func(t *testing.T) {
			rule, ok := auth.RuleFor(m)
			if !ok {
				t.Fatal("not in the authorization table")
			}
			passes := func(who string) {
				t.Helper()
				if c := status.Code(rawCall(e.as(who), cc, m)); c == codes.Unauthenticated || c == codes.PermissionDenied {
					t.Errorf("as %q (%s): %v, want past authorization", who, rule, rawCall(e.as(who), cc, m))
				}
			}
			if rule.Open {
				passes("")
				return
			}
			h, ok := holder[rule.Role]
			if !ok {
				t.Fatalf("rule %s: no test identity for it", rule)
			}
			err := rawCall(e.as(h.without), cc, m)
			want, msg := codes.PermissionDenied, "needs role "+rule.Role.String()
			if h.without == "" {
				want, msg = codes.Unauthenticated, "no credentials"
			}
			if status.Code(err) != want || !strings.Contains(status.Convert(err).Message(), msg) {
				t.Errorf("as %q: %v, want %v containing %q", h.without, err, want, msg)
			}
			passes(h.with)
		})
	}
}
