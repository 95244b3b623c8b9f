package readiness

import (
	"fmt"
	"strings"
	"time"
)

// The minimum sample of a verdict: below either, GetMigrationStatus answers
// "unknown" (can_absorb false, sample_missing set) however the figures
// look, so that a window emptied by a restart, or holding a handful of
// picks, never approves a cutover. They are low bars, meant to catch no
// evidence rather than to prove a steady state: read Covered and Picks
// for that.
const (
	// MinVerdictPicks is the fewest picks of the pool in the window.
	MinVerdictPicks = 30
	// MinVerdictCovered is the least time the window must cover.
	MinVerdictCovered = time.Second
)

// SampleMissing returns what st lacks for a verdict (MinVerdictPicks,
// MinVerdictCovered), in one line with units, or "" when the sample is
// enough.
func (st *Status) SampleMissing() string {
	var missing []string
	if st.Picks < MinVerdictPicks {
		missing = append(missing, fmt.Sprintf("%d more picks (has %d of the %d needed)", MinVerdictPicks-st.Picks, st.Picks, MinVerdictPicks))
	}
	if st.Covered < MinVerdictCovered {
		missing = append(missing, fmt.Sprintf("%v more of the window covered (has %v of the %v needed)",
			(MinVerdictCovered-st.Covered).Round(time.Millisecond), st.Covered.Round(time.Millisecond), MinVerdictCovered))
	}
	return strings.Join(missing, " and ")
}
