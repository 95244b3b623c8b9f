package auth

import (
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
)

// TestHas: operator implies operator-read, not the reverse; AnyRole is
// held by every principal.
func TestHas(t *testing.T) {
	for _, tc := range []struct {
		have, need Role
		want       bool
	}{
		{RoleOperator, RoleOperatorRead, true},
		{RoleOperatorRead, RoleOperator, false},
		{RoleGateway, RoleInstance, false},
		{RoleGateway | RoleInstance, RoleInstance, true},
		{RoleInstance, AnyRole, true},
		{RoleOperator, RoleGateway, false},
	} {
		if got := (&Principal{Roles: tc.have}).Has(tc.need); got != tc.want {
			t.Errorf("%s has %s: %v, want %v", tc.have, tc.need, got, tc.want)
		}
	}
}

// TestCheckReport: a bound principal may report inside its binding only;
// empty fields of a later report mean "unchanged" and pass.
func TestCheckReport(t *testing.T) {
	pool := &Principal{Name: "p", Bind: &Binding{Pool: "chat"}}
	dep := &Principal{Name: "d", Bind: &Binding{Pool: "chat", Deployment: "a"}}
	inst := &Principal{Name: "i", Bind: &Binding{Pool: "chat", Deployment: "a", Instance: "a-1"}}
	free := &Principal{Name: "f"}
	r := func(pool, dep, id string) *pb.ReportLoadRequest {
		return &pb.ReportLoadRequest{Pool: pool, Deployment: dep, InstanceId: id}
	}
	for _, tc := range []struct {
		name string
		p    *Principal
		r    *pb.ReportLoadRequest
		want string // "" allowed, else the PermissionDenied message
	}{
		{"unbound", free, r("other", "z", "z-1"), ""},
		{"pool inside", pool, r("chat", "z", "z-1"), ""},
		{"pool outside", pool, r("other", "a", "a-1"), `identity "p" is bound to pool "chat"; this stream reports pool "other"`},
		{"deployment inside", dep, r("chat", "a", "a-9"), ""},
		{"deployment outside", dep, r("chat", "b", "b-1"), `identity "d" is bound to pool "chat" deployment "a"; this stream reports deployment "b"`},
		{"later report, fields empty", dep, r("", "", ""), ""},
		{"instance inside", inst, r("chat", "a", "a-1"), ""},
		{"instance outside", inst, r("chat", "a", "a-2"), `identity "i" is bound to pool "chat" deployment "a" instance_id "a-1"; this stream reports instance_id "a-2"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.p.CheckReport(tc.r)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (status.Code(err) != codes.PermissionDenied || status.Convert(err).Message() != tc.want):
				t.Fatalf("got %v, want PermissionDenied %q", err, tc.want)
			}
		})
	}
}
