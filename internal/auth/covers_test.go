package auth

import "testing"

// TestCovers: a binding covers an instance where it lives only when every
// field it sets matches; no binding covers everything.
func TestCovers(t *testing.T) {
	for _, tc := range []struct {
		bind            *Binding
		pool, dep, inst string
		want            bool
	}{
		{nil, "P", "a", "a-1", true},
		{&Binding{Pool: "P"}, "P", "a", "a-1", true},
		{&Binding{Pool: "P"}, "Q", "a", "a-1", false},
		{&Binding{Pool: "P", Deployment: "b"}, "P", "b", "a-1", true},
		{&Binding{Pool: "P", Deployment: "b"}, "P", "a", "a-1", false},
		{&Binding{Pool: "P", Deployment: "b", Instance: "a-1"}, "P", "a", "a-1", false},
		{&Binding{Pool: "P", Deployment: "a", Instance: "a-1"}, "P", "a", "a-1", true},
		{&Binding{Pool: "P", Instance: "a-1"}, "P", "a", "a-2", false},
	} {
		p := &Principal{Name: "x", Roles: RoleInstance, Bind: tc.bind}
		if got := p.Covers(tc.pool, tc.dep, tc.inst); got != tc.want {
			t.Errorf("%v covers %s/%s/%s = %v, want %v", tc.bind, tc.pool, tc.dep, tc.inst, got, tc.want)
		}
	}
}
