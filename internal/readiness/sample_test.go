package readiness

import (
	"testing"
	"time"
)

// TestSampleMissing: the verdict's minimum sample at its edges.
func TestSampleMissing(t *testing.T) {
	tests := []struct {
		picks   uint64
		covered time.Duration
		want    string
	}{
		{MinVerdictPicks, MinVerdictCovered, ""},
		{1000, time.Minute, ""},
		{MinVerdictPicks - 1, MinVerdictCovered, "1 more picks (has 29 of the 30 needed)"},
		{MinVerdictPicks, MinVerdictCovered - time.Millisecond, "1ms more of the window covered (has 999ms of the 1s needed)"},
		{2, 400 * time.Millisecond, "28 more picks (has 2 of the 30 needed) and 600ms more of the window covered (has 400ms of the 1s needed)"},
		{0, 0, "30 more picks (has 0 of the 30 needed) and 1s more of the window covered (has 0s of the 1s needed)"},
	}
	for _, tc := range tests {
		st := Status{Picks: tc.picks, Covered: tc.covered}
		if got := st.SampleMissing(); got != tc.want {
			t.Errorf("%d picks over %v: %q, want %q", tc.picks, tc.covered, got, tc.want)
		}
	}
}
