package rollout

import (
	"errors"
	"testing"
	"time"
)

// TestHoldReason works the headroom formula by hand. The ramp moves a from
// 3/4 of the traffic to 1/2 in its first step: a loses (3/4−1/2)/(3/4) = 1/3
// of its share. With b at 40 ms/s of prefill on a capacity of 100 ms/s and
// 60 ms/s extra if a went to 0, the step leaves b
// 100·(1 − (40 + 60/3)/100) = 40% headroom.
func TestHoldReason(t *testing.T) {
	ramp := func(minPct float64, applied int) *Ramp {
		r := New(1, map[string]float64{"a": 3, "b": 1}, []Step{
			{map[string]float64{"a": 1, "b": 1}, time.Minute},
			{map[string]float64{"a": 0, "b": 1}, time.Minute},
		}, AutoHold{MinHeadroomPct: minPct, From: "a", To: "b"}, t0, "alice")
		r.Applied = applied
		return &r
	}
	load := ToLoad{Known: true, PrefillMsPerSec: 40, CapacityMsPerSec: 100, ExtraPrefillMsPerSec: 60}
	for _, c := range []struct {
		name    string
		r       *Ramp
		load    ToLoad
		err     error
		applies bool
		want    string
	}{
		{"auto-hold off", ramp(0, 0), load, nil, false, ""},
		{"no step left", ramp(50, 2), load, nil, false, ""},
		{"headroom 40% meets 40%", ramp(40, 0), load, nil, true, ""},
		{"headroom 40% under 41%", ramp(41, 0), load, nil, true, "auto-hold: step 1 would leave b 40.0% prefill headroom (< 41%)"},
		// Step 2 takes a from 1/2 to 0: all of it moves, 100·(1 − (40+60)/100) = 0%.
		{"last step moves it all", ramp(10, 1), load, nil, true, "auto-hold: step 2 would leave b 0.0% prefill headroom (< 10%)"},
		{"estimate failed", ramp(10, 0), load, errors.New("unknown deployment"), true, "auto-hold: cannot estimate b's headroom: unknown deployment"},
		{"no throughput", ramp(10, 0), ToLoad{}, nil, true, "auto-hold: b has no eligible instance reporting its prefill throughput"},
		{"no capacity", ramp(10, 0), ToLoad{Known: true}, nil, true, "auto-hold: b has no eligible instance reporting its prefill throughput"},
		{"disaggregated b without a prefill side", ramp(10, 0), ToLoad{Known: true, PrefillMsPerSec: 1, CapacityMsPerSec: 100, Missing: "no eligible prefill instance (of 2)"},
			nil, true, "auto-hold: b is not ready: no eligible prefill instance (of 2)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := c.r.HoldApplies(); got != c.applies {
				t.Errorf("HoldApplies() = %v, want %v", got, c.applies)
			}
			if got := c.r.HoldReason(c.load, c.err); got != c.want {
				t.Errorf("HoldReason = %q, want %q", got, c.want)
			}
		})
	}
}
