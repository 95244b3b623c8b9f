package state

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/prefixroute/prefixroute/scheduler"
)

// TestApplyOutcomes walks an instance through the unreachable exclusion:
// each step applies outcomes or a report at a time, then checks what
// ApplyOutcomes returned, whether b is unreachable, how Instances (and so
// ListInstances) shows it with its back-off left, and the reason a full
// and a chosen-only pick give it (invariants hold throughout).
func TestApplyOutcomes(t *testing.T) {
	_, p := newTestPool(t, Limits{})
	connect(t, p, t0, "dep", "a", &Report{})
	sb := connect(t, p, t0, "dep", "b", &Report{})
	failed := []Outcome{{Instance: "b", Kind: OutcomeConnectFailed}}
	served := []Outcome{{Instance: "b", Kind: OutcomeServed}}
	for _, step := range []struct {
		name   string
		at     time.Duration
		outs   []Outcome // applied, unless report
		report bool      // b reports instead
		want   OutcomeResult
		unr    bool
		left   time.Duration // b's back-off left, as Instances shows it
	}{
		{"served while reachable: nothing", 0, served, false, OutcomeResult{}, false, 0},
		{"unknown instance: counted", 0, []Outcome{{Instance: "zz", Kind: OutcomeConnectFailed}, {Instance: "a", Kind: OutcomeOther}}, false, OutcomeResult{Unknown: 1}, false, 0},
		{"connect failed: excluded", 0, failed, false, OutcomeResult{Excluded: 1}, true, UnreachableBackoff},
		{"again: already excluded", time.Second, failed, false, OutcomeResult{}, true, UnreachableBackoff},
		{"report within the back-off: kept", time.Second + UnreachableBackoff - 1, nil, true, OutcomeResult{}, true, 1},
		{"report after the back-off: back", time.Second + UnreachableBackoff, nil, true, OutcomeResult{}, false, 0},
		{"connect failed again", 7 * time.Second, failed, false, OutcomeResult{Excluded: 1}, true, UnreachableBackoff},
		{"served: back", 7 * time.Second, served, false, OutcomeResult{Restored: 1}, false, 0},
		{"failed and served in one batch: served last wins", 8 * time.Second, append(failed, served...), false, OutcomeResult{Excluded: 1, Restored: 1}, false, 0},
	} {
		now := t0.Add(step.at)
		var got OutcomeResult
		if step.report {
			if err := sb.Report(now, &Report{}); err != nil {
				t.Fatal(err)
			}
			connect(t, p, now, "dep", "a", &Report{}) // a stays fresh too
		} else {
			got = p.ApplyOutcomes(now, step.outs)
		}
		unr, known := p.Unreachable("b")
		if got != step.want || unr != step.unr || !known {
			t.Errorf("%s: result %+v, unreachable %v (known %v); want %+v, %v", step.name, got, unr, known, step.want, step.unr)
		}
		wantState := map[bool]InstanceState{false: StateOK, true: StateUnreachable}[step.unr]
		for _, in := range p.Instances(now) {
			if in.Instance == "b" && (in.State != wantState || in.BackoffLeft != step.left) {
				t.Errorf("%s: Instances shows b %v with %v of back-off left, want %v with %v", step.name, in.State, in.BackoffLeft, wantState, step.left)
			}
		}
		mustInvariants(t, p)
		for _, chosenOnly := range []bool{false, true} {
			var pk Pick
			rng := rand.New(rand.NewPCG(1, 2))
			if err := p.Pick(now, &PickInput{PromptTokens: 10, ChosenOnly: chosenOnly}, rng, &pk); err != nil {
				t.Fatalf("%s: pick: %v", step.name, err)
			}
			if pk.Decision.Excluded[scheduler.ReasonUnreachable] != map[bool]int{true: 1}[step.unr] {
				t.Errorf("%s (chosen only %v): %d excluded as unreachable, want b: %v", step.name, chosenOnly,
					pk.Decision.Excluded[scheduler.ReasonUnreachable], step.unr)
			}
			if id := pk.Snapshot.Instances[pk.Decision.Instance].ID; step.unr && id != "a" {
				t.Errorf("%s (chosen only %v): chose %s, which is unreachable", step.name, chosenOnly, id)
			}
		}
	}
}
