package readiness

import "testing"

// TestMissingSide: a deployment with prefill instances is ready only with
// an eligible prefill and an eligible decode (or both) instance; one
// without prefill instances only needs an eligible instance, as before.
func TestMissingSide(t *testing.T) {
	for _, tc := range []struct {
		l    LiveDeployment
		want string
	}{
		{LiveDeployment{Instances: 3}, ""},
		{LiveDeployment{Instances: 0}, ""},
		{LiveDeployment{Instances: 3, PrefillRole: 1, PrefillEligible: 1}, ""},
		{LiveDeployment{Instances: 2, PrefillRole: 2, PrefillEligible: 0}, "no eligible prefill instance (of 2)"},
		{LiveDeployment{Instances: 1, PrefillRole: 1, PrefillEligible: 1}, "no eligible decode instance"},
		{LiveDeployment{Instances: 0, PrefillRole: 1}, "no eligible prefill instance (of 1) and no eligible decode instance"},
	} {
		if got := missingSide(tc.l); got != tc.want {
			t.Errorf("missingSide(%+v) = %q, want %q", tc.l, got, tc.want)
		}
	}
}
