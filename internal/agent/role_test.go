package agent

import (
	"errors"
	"testing"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
)

// TestResolveRole: the configured role, the engine's, or both; a
// contradiction is ErrRole.
func TestResolveRole(t *testing.T) {
	for _, tc := range []struct {
		configured, engine string
		want               pb.PdRole
		err                bool
	}{
		{"", "", pb.PdRole_PD_ROLE_UNSPECIFIED, false},
		{"", "unified", pb.PdRole_PD_ROLE_UNSPECIFIED, false},
		{"", "prefill", pb.PdRole_PD_ROLE_PREFILL, false},
		{"", "decode", pb.PdRole_PD_ROLE_DECODE, false},
		{"prefill", "", pb.PdRole_PD_ROLE_PREFILL, false},
		{"decode", "", pb.PdRole_PD_ROLE_DECODE, false},
		{"both", "unified", pb.PdRole_PD_ROLE_UNSPECIFIED, false},
		{"decode", "decode", pb.PdRole_PD_ROLE_DECODE, false},
		{"prefill", "decode", 0, true},
		{"both", "prefill", 0, true},
		{"decode", "some-future-mode", pb.PdRole_PD_ROLE_DECODE, false},
	} {
		got, err := resolveRole(tc.configured, tc.engine)
		if (err != nil) != tc.err || (err != nil && !errors.Is(err, ErrRole)) || (err == nil && got != tc.want) {
			t.Errorf("resolveRole(%q, %q) = %v, %v; want %v (error %v)", tc.configured, tc.engine, got, err, tc.want, tc.err)
		}
	}
	if checkRole("encode") == nil || checkRole("") != nil || checkRole("Decode") != nil {
		t.Error("checkRole")
	}
}
