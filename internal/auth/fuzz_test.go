package auth

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// FuzzAuthorize sends any authorization header to any method: Authorize
// never panics, refuses with Unauthenticated or PermissionDenied only, and
// lets a call through only on a method of the table, with a known token or
// none needed.
func FuzzAuthorize(f *testing.F) {
	for _, s := range [][2]string{
		{"Bearer token-of-gw-0123456", "/prefixroute.v1.PickService/Pick"},
		{"bearer  token-of-ops-0123456 ", "/prefixroute.v1.AdminService/SetWeights"},
		{"Bearer", "/grpc.health.v1.Health/Check"},
		{"Basic \x00\xff", "/prefixroute.v1.AdminService/Get"},
		{"", ""},
	} {
		f.Add(s[0], s[1])
	}
	a := newTestAuthenticator(f)
	f.Fuzz(func(t *testing.T, authz, method string) {
		ctx, err := a.Authorize(callCtx(authz, nil), method)
		rule, known := RuleFor(method)
		switch code := status.Code(err); {
		case err == nil:
			c := CallerFrom(ctx)
			if !known || !rule.Open && (c == nil || !c.Has(rule.Role) || !strings.Contains(authz, "token-of-")) {
				t.Fatalf("%q on %q let through as %+v", authz, method, c)
			}
		case code != codes.Unauthenticated && code != codes.PermissionDenied:
			t.Fatalf("%q on %q: %v", authz, method, err)
		}
	})
}
