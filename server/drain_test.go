package server_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/durationpb"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/internal/servertest"
)

// TestDrainGuardSetWeights: with A and B serving, a change that names a
// deployment the pool never saw, or that leaves no deployment with an
// eligible instance above 0, is refused with FailedPrecondition naming the
// deployments and the CLI override; pre-creating C at weight 0 is not; with
// allow_drain the change is made and the audit log says it was overridden.
func TestDrainGuardSetWeights(t *testing.T) {
	e := servertest.Start(t)
	report(e, rep("m", "A", "a1"))
	report(e, rep("m", "B", "b1"))
	tests := []struct {
		name    string
		weights map[string]float64
		want    []string // nil: allowed
	}{
		{"typo", map[string]float64{"A": 1, "C": 1},
			[]string{`pool "m"`, `the pool has never seen "C" (it knows "A", "B")`, "prefixctl weights set --force"}},
		{"all to the unseen", map[string]float64{"C": 1},
			[]string{`the traffic of "A", "B" (serving now) would all go to "C", with no eligible instance`, `never seen "C"`}},
		{"all zero", map[string]float64{"A": 0, "B": 0}, []string{`every weight would be 0, draining "A", "B"`}},
		{"B out, A keeps it", map[string]float64{"A": 1}, nil},
		{"pre-create C at 0", map[string]float64{"A": 1, "B": 1, "C": 0}, nil},
		{"all to C, known but empty", map[string]float64{"A": 0, "B": 0, "C": 1},
			[]string{`would all go to "C", with no eligible instance: picks would fail until an instance of "C" reports ok`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.Admin.SetWeights(ctx(t), &pb.SetWeightsRequest{AllowNewPool: true, Pool: "m", Weights: tc.weights})
			if tc.want == nil {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			wantCode(t, err, codes.FailedPrecondition, tc.want...)
		})
	}
	before := weights(e, "m").GetVersion()
	if _, err := e.Admin.SetWeights(ctx(t), &pb.SetWeightsRequest{AllowNewPool: true, Pool: "m", Weights: map[string]float64{"C": 1}, AllowDrain: true}); err != nil {
		t.Fatalf("allow_drain: %v", err)
	}
	if v := weights(e, "m").GetVersion(); v != before+1 {
		t.Errorf("version %d after the override, want %d", v, before+1)
	}
	audit, err := os.ReadFile(filepath.Join(e.Dir, "audit.log"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(audit)), "\n")
	if last := lines[len(lines)-1]; !strings.Contains(last, `allow_drain overrode: drain guard: pool \"m\": the traffic of \"A\", \"B\"`) {
		t.Errorf("last audit record %s: want the override named", last)
	}
	for _, l := range lines[:len(lines)-1] {
		if strings.Contains(l, "allow_drain") {
			t.Errorf("a change that needed no override records one: %s", l)
		}
	}
}

// TestDrainGuardRamp: a ramp whose last step gives all traffic to a
// deployment without an eligible instance is refused at StartRamp (step
// named); with allow_drain it starts and says so. A ramp started while its
// target served is paused, not stepped, once the target's instance is gone
// before the draining step is due (a keeps reporting, so it serves); resumed,
// it is paused again.
func TestDrainGuardRamp(t *testing.T) {
	e := servertest.Start(t, manualRamps)
	a := report(e, rep("chat", "a", "a1"))
	setWeights(e, "chat", map[string]float64{"a": 1, "b": 0})
	req := &pb.StartRampRequest{AllowNewPool: true, Pool: "chat", Target: map[string]float64{"b": 1},
		Duration: durationpb.New(2 * time.Minute), StepInterval: durationpb.New(time.Minute)}
	_, err := e.Admin.StartRamp(ctx(t), req)
	wantCode(t, err, codes.FailedPrecondition, `drain guard: pool "chat": step 2 of 2: the traffic of "a" (serving now) would all go to "b"`,
		"prefixctl ramp start --force")
	req.AllowDrain = true
	r, err := e.Admin.StartRamp(ctx(t), req)
	if err != nil || !r.GetRamp().GetAllowDrain() || !strings.Contains(r.GetRamp().GetStartedBy(), "allow_drain overrode") {
		t.Fatalf("with allow_drain: %v, %v", r, err)
	}
	if _, err := e.Admin.AbortRamp(ctx(t), &pb.AbortRampRequest{Pool: "chat", RampId: r.GetRamp().GetId()}); err != nil {
		t.Fatal(err)
	}

	b := report(e, rep("chat", "b", "b1"))
	req.AllowDrain = false
	r, err = e.Admin.StartRamp(ctx(t), req)
	if err != nil || r.GetRamp().GetAllowDrain() || strings.Contains(r.GetRamp().GetStartedBy(), "allow_drain") {
		t.Fatalf("with b serving: %v, %v", r, err)
	}
	srv := e.D.Server()
	e.Clock.Advance(time.Minute)
	if n := srv.AdvanceRamps(); n != 1 {
		t.Fatalf("step 1 (half to b, a still serving): %d applied, want 1", n)
	}
	b.close()
	e.Clock.Advance(time.Minute)
	for range 2 {
		a.send(rep("chat", "a", "a1")) // a keeps serving: not stale
		if n := srv.AdvanceRamps(); n != 0 {
			t.Fatalf("step 2 with b gone: %d applied, want 0", n)
		}
		got := weights(e, "chat")
		if rp := got.GetRamp(); rp.GetState() != pb.RampState_RAMP_STATE_PAUSED || rp.GetStepsApplied() != 1 ||
			!strings.Contains(rp.GetReason(), `drain guard: step 2 of 2: the traffic of "a" (serving now) would all go to "b"`) {
			t.Fatalf("ramp %v: want paused at step 1 by the drain guard", rp)
		}
		if got.GetWeights()["a"] == 0 {
			t.Fatalf("weights %v: a drained", got.GetWeights())
		}
		if _, err := e.Admin.ResumeRamp(ctx(t), &pb.ResumeRampRequest{Pool: "chat", RampId: r.GetRamp().GetId()}); err != nil {
			t.Fatal(err)
		}
		e.Clock.Advance(time.Minute)
	}
}
