package scheduler_test

import (
	"testing"

	"github.com/prefixroute/prefixroute/scheduler"
)

func TestReasonString(t *testing.T) {
	tests := []struct {
		r        scheduler.Reason
		want     string
		instance bool
		elig     bool
	}{
		{scheduler.ReasonNone, "", false, false},
		{scheduler.ReasonPrefillRole, "prefill_role", true, true},
		{scheduler.ReasonDisconnected, "disconnected", true, true},
		{scheduler.ReasonStale, "stale", true, true},
		{scheduler.ReasonUnreachable, "unreachable", true, true},
		{scheduler.ReasonDraining, "draining", true, true},
		{scheduler.ReasonExcluded, "excluded_by_request", true, true},
		{scheduler.ReasonKVFull, "kv_full", true, true},
		{scheduler.ReasonQueueFull, "queue_full", true, true},
		{scheduler.ReasonThreshold, "outside_threshold", true, false},
		{scheduler.ReasonNotMinimum, "not_minimum", true, false},
		{scheduler.ReasonSLOMiss, "slo_miss", true, false},
		{scheduler.ReasonShortLane, "short_lane", true, false},
		{scheduler.ReasonZeroWeight, "zero_weight", false, false},
		{scheduler.ReasonUnweighted, "not_in_weights", false, false},
		{scheduler.ReasonNoEligibleInstance, "no_eligible_instance", false, false},
		{scheduler.NumReasons, "Reason(16)", false, false},
		{200, "Reason(200)", false, false},
	}
	if len(tests) != int(scheduler.NumReasons)+2 {
		t.Fatalf("table misses a reason: %d rows for %d reasons", len(tests), scheduler.NumReasons)
	}
	for _, tt := range tests {
		if got := tt.r.String(); got != tt.want {
			t.Errorf("Reason(%d).String() = %q, want %q", tt.r, got, tt.want)
		}
		if got := tt.r.IsInstance(); got != tt.instance {
			t.Errorf("%q.IsInstance() = %v", tt.want, got)
		}
		if got := tt.r.IsEligibility(); got != tt.elig {
			t.Errorf("%q.IsEligibility() = %v", tt.want, got)
		}
		back, ok := scheduler.ParseReason(tt.want)
		if wantOK := tt.r < scheduler.NumReasons; ok != wantOK || (ok && back != tt.r) {
			t.Errorf("ParseReason(%q) = %v, %v", tt.want, back, ok)
		}
	}
}

func TestExcludedSummary(t *testing.T) {
	var d scheduler.Decision
	if got := d.ExcludedSummary(); got != "" {
		t.Fatalf("empty summary = %q", got)
	}
	d.Excluded[scheduler.ReasonDraining] = 1
	d.Excluded[scheduler.ReasonStale] = 3
	d.Excluded[scheduler.ReasonThreshold] = 2
	if got, want := d.ExcludedSummary(), "3 stale, 1 draining, 2 outside_threshold"; got != want {
		t.Fatalf("summary = %q, want %q", got, want)
	}
}
