package auth

import (
	"testing"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	rpb "google.golang.org/grpc/reflection/grpc_reflection_v1"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
)

// servedDescs are the services the daemon registers (v1alpha reflection
// aside: its generated package is deprecated), with the ext_proc front
// end's.
var servedDescs = []*grpc.ServiceDesc{&pb.PickService_ServiceDesc, &pb.LoadService_ServiceDesc, &pb.AdminService_ServiceDesc,
	&healthpb.Health_ServiceDesc, &rpb.ServerReflection_ServiceDesc, &extprocv3.ExternalProcessor_ServiceDesc}

// descMethods are the full names of every method and stream of the descs.
func descMethods(descs []*grpc.ServiceDesc) []string {
	var out []string
	for _, d := range descs {
		for _, m := range d.Methods {
			out = append(out, "/"+d.ServiceName+"/"+m.MethodName)
		}
		for _, s := range d.Streams {
			out = append(out, "/"+d.ServiceName+"/"+s.StreamName)
		}
	}
	return out
}

// TestMethodTableMatchesServices: every method of every served service
// has a rule, every rule is for a served method (no stale or misspelt
// line), and the admin methods are split between operator-read and
// operator only.
func TestMethodTableMatchesServices(t *testing.T) {
	served := map[string]bool{reflectionV1Alpha: true}
	for _, m := range descMethods(servedDescs) {
		served[m] = true
		if _, ok := RuleFor(m); !ok {
			t.Errorf("%s has no rule", m)
		}
	}
	for m, r := range methodRules {
		if !served[m] {
			t.Errorf("rule for %s, which no served service has", m)
		}
		if r.Open && r.Role != AnyRole {
			t.Errorf("%s: open and role %s", m, r.Role)
		}
	}
	for _, m := range descMethods([]*grpc.ServiceDesc{&pb.AdminService_ServiceDesc}) {
		if r := methodRules[m]; r.Open || (r.Role != RoleOperator && r.Role != RoleOperatorRead) {
			t.Errorf("admin method %s has rule %s, want role operator or operator-read", m, r)
		}
	}
}

// TestRuleString: how rules read in test failures and docs.
func TestRuleString(t *testing.T) {
	for _, tc := range []struct {
		r    Rule
		want string
	}{
		{Rule{Open: true}, "open"},
		{Rule{Role: AnyRole}, "any identity"},
		{Rule{Role: RoleOperatorRead}, "role operator-read"},
		{Rule{Role: RoleGateway | RoleInstance}, "role gateway,instance"},
	} {
		if got := tc.r.String(); got != tc.want {
			t.Errorf("%#v: %q, want %q", tc.r, got, tc.want)
		}
	}
}
