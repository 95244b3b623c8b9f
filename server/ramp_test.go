package server_test

import (
	"context"
	"maps"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/durationpb"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/daemon"
	"github.com/prefixroute/prefixroute/internal/servertest"
)

// manualRamps slows the ramp ticker to once an hour: the test applies due
// steps itself with AdvanceRamps, at fake-clock times it chooses.
var manualRamps = servertest.Config(func(c *daemon.Config) { c.Server.RampTick = time.Hour })

// weights reads pool's weights from e.
func weights(e *servertest.Sidecar, pool string) *pb.GetWeightsResponse {
	e.T.Helper()
	r, err := e.Admin.GetWeights(context.Background(), &pb.GetWeightsRequest{Pool: pool})
	if err != nil {
		e.T.Fatal(err)
	}
	return r
}

func TestRampStepsOnSchedule(t *testing.T) {
	e := servertest.Start(t, manualRamps)
	ctx := context.Background()
	setWeights(e, "chat", map[string]float64{"a": 1, "b": 0})
	r, err := e.Admin.StartRamp(ctx, &pb.StartRampRequest{AllowNewPool: true, Pool: "chat", Target: map[string]float64{"b": 1},
		Duration: durationpb.New(4 * time.Minute), StepInterval: durationpb.New(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if got := r.GetRamp(); got.GetState() != pb.RampState_RAMP_STATE_RUNNING || len(got.GetSteps()) != 4 ||
		got.GetUntilNext().AsDuration() != time.Minute || got.GetUntilDone().AsDuration() != 4*time.Minute {
		t.Fatalf("started ramp = %v", got)
	}
	srv := e.D.Server()
	wantShares := []float64{0.25, 0.5, 0.75, 1}
	for step, share := range wantShares {
		e.Clock.Advance(59 * time.Second)
		if n := srv.AdvanceRamps(); n != 0 {
			t.Fatalf("step %d applied a second early", step+1)
		}
		e.Clock.Advance(time.Second)
		if n := srv.AdvanceRamps(); n != 1 {
			t.Fatalf("step %d not applied on time: %d", step+1, n)
		}
		w := weights(e, "chat")
		if w.GetRamp().GetStepsApplied() != uint32(step+1) || w.GetVersion() != uint64(step+2) {
			t.Fatalf("after step %d: ramp %v version %d", step+1, w.GetRamp(), w.GetVersion())
		}
		for _, d := range w.GetDeployments() {
			if d.GetDeployment() == "b" && d.GetShare() != share {
				t.Errorf("after step %d b's share = %v, want %v", step+1, d.GetShare(), share)
			}
		}
	}
	w := weights(e, "chat")
	if w.GetRamp().GetState() != pb.RampState_RAMP_STATE_DONE || !maps.Equal(w.GetWeights(), map[string]float64{"a": 0, "b": 1}) {
		t.Fatalf("after the ramp: %v %v", w.GetRamp().GetState(), w.GetWeights())
	}
	// Weights are free again.
	setWeights(e, "chat", map[string]float64{"a": 1, "b": 1})
}

func TestRampSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	e := servertest.Start(t, servertest.Dir(dir), manualRamps)
	ctx := context.Background()
	setWeights(e, "chat", map[string]float64{"a": 1, "b": 0})
	if _, err := e.Admin.StartRamp(ctx, &pb.StartRampRequest{AllowNewPool: true, Pool: "chat", Target: map[string]float64{"b": 1},
		Duration: durationpb.New(3 * time.Minute), StepInterval: durationpb.New(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	e.Clock.Advance(time.Minute)
	e.D.Server().AdvanceRamps()
	before := weights(e, "chat")
	e.Stop()

	// Back 10 minutes later (the new daemon's clock starts where the old one
	// did): one overdue step is applied, not all of them at once, and the
	// next waits its full interval from then.
	e = servertest.Start(t, servertest.Dir(dir), manualRamps)
	w := weights(e, "chat")
	if w.GetRamp().GetStepsApplied() != 1 || !maps.Equal(w.GetWeights(), before.GetWeights()) || w.GetVersion() != before.GetVersion() {
		t.Fatalf("after restart: %v %v, want %v", w.GetRamp(), w.GetWeights(), before.GetWeights())
	}
	e.Clock.Advance(11 * time.Minute)
	srv := e.D.Server()
	if n := srv.AdvanceRamps(); n != 1 {
		t.Fatalf("overdue step: applied %d", n)
	}
	if n := srv.AdvanceRamps(); n != 0 {
		t.Fatalf("a restart made the ramp jump: applied %d more", n)
	}
	w = weights(e, "chat")
	if w.GetRamp().GetStepsApplied() != 2 || w.GetRamp().GetUntilNext().AsDuration() != time.Minute {
		t.Fatalf("after the overdue step: %v", w.GetRamp())
	}
}

func TestRampPauseResumeAbort(t *testing.T) {
	e := servertest.Start(t, manualRamps)
	ctx := context.Background()
	setWeights(e, "chat", map[string]float64{"a": 1, "b": 0})
	steps := []*pb.RampStep{
		{Weights: map[string]float64{"a": 9, "b": 1}, After: durationpb.New(0)},
		{Weights: map[string]float64{"a": 1, "b": 1}, After: durationpb.New(10 * time.Minute)},
		{Weights: map[string]float64{"a": 0, "b": 1}, After: durationpb.New(10 * time.Minute)},
	}
	if _, err := e.Admin.StartRamp(ctx, &pb.StartRampRequest{AllowNewPool: true, Pool: "chat", Steps: steps}); err != nil {
		t.Fatal(err)
	}
	srv := e.D.Server()
	if srv.AdvanceRamps() != 1 { // after 0: at once
		t.Fatal("a step with after 0 was not applied at once")
	}
	// While the ramp runs, SetWeights and a second ramp are refused.
	_, err := e.Admin.SetWeights(ctx, &pb.SetWeightsRequest{AllowNewPool: true, Pool: "chat", Weights: map[string]float64{"a": 1}})
	wantCode(t, err, codes.FailedPrecondition, "ramp 1 is running")
	_, err = e.Admin.StartRamp(ctx, &pb.StartRampRequest{AllowNewPool: true, Pool: "chat", Steps: steps})
	wantCode(t, err, codes.FailedPrecondition, "abort it before starting another")

	e.Clock.Advance(4 * time.Minute)
	p, err := e.Admin.PauseRamp(ctx, &pb.PauseRampRequest{Pool: "chat"})
	if err != nil || p.GetRamp().GetUntilNext().AsDuration() != 6*time.Minute || p.GetRamp().GetReason() == "" {
		t.Fatalf("pause: %v %v", p.GetRamp(), err)
	}
	_, err = e.Admin.PauseRamp(ctx, &pb.PauseRampRequest{Pool: "chat"})
	wantCode(t, err, codes.FailedPrecondition, "only a running ramp can be paused")
	e.Clock.Advance(time.Hour)
	if srv.AdvanceRamps() != 0 {
		t.Fatal("a paused ramp stepped")
	}
	if _, err := e.Admin.ResumeRamp(ctx, &pb.ResumeRampRequest{Pool: "chat", RampId: 1}); err != nil {
		t.Fatal(err)
	}
	e.Clock.Advance(6 * time.Minute)
	if srv.AdvanceRamps() != 1 {
		t.Fatal("resumed ramp did not step after the wait it had left")
	}
	a, err := e.Admin.AbortRamp(ctx, &pb.AbortRampRequest{Pool: "chat"})
	if err != nil || a.GetRamp().GetState() != pb.RampState_RAMP_STATE_ABORTED {
		t.Fatalf("abort: %v %v", a, err)
	}
	if w := weights(e, "chat").GetWeights(); !maps.Equal(w, map[string]float64{"a": 1, "b": 1}) {
		t.Errorf("abort changed the weights: %v", w)
	}
	e.Clock.Advance(time.Hour)
	if srv.AdvanceRamps() != 0 {
		t.Fatal("an aborted ramp stepped")
	}
	_, err = e.Admin.ResumeRamp(ctx, &pb.ResumeRampRequest{Pool: "chat"})
	wantCode(t, err, codes.FailedPrecondition, "only a paused ramp can be resumed")
}

func TestRampErrors(t *testing.T) {
	e := servertest.Start(t, manualRamps)
	ctx := context.Background()
	d := durationpb.New
	step := []*pb.RampStep{{Weights: map[string]float64{"b": 1}, After: d(time.Second)}}
	tests := []struct {
		name string
		req  *pb.StartRampRequest
		code codes.Code
		msg  string
	}{
		{"no pool", &pb.StartRampRequest{Steps: step}, codes.InvalidArgument, "pool is empty"},
		{"nothing", &pb.StartRampRequest{AllowNewPool: true, Pool: "chat"}, codes.InvalidArgument, "no ramp given"},
		{"both forms", &pb.StartRampRequest{AllowNewPool: true, Pool: "chat", Steps: step, Target: map[string]float64{"b": 1}}, codes.InvalidArgument, "not both"},
		{"no interval", &pb.StartRampRequest{AllowNewPool: true, Pool: "chat", Target: map[string]float64{"b": 1}, Duration: d(time.Minute)}, codes.InvalidArgument, "needs both"},
		{"interval too short", &pb.StartRampRequest{AllowNewPool: true, Pool: "chat", Target: map[string]float64{"b": 1}, Duration: d(time.Minute), StepInterval: d(time.Millisecond)},
			codes.InvalidArgument, "below the minimum 1s"},
		{"negative target", &pb.StartRampRequest{AllowNewPool: true, Pool: "chat", Target: map[string]float64{"b": -1}, Duration: d(time.Minute), StepInterval: d(time.Second)},
			codes.InvalidArgument, "target"},
		{"bad after", &pb.StartRampRequest{AllowNewPool: true, Pool: "chat", Steps: []*pb.RampStep{{Weights: map[string]float64{"b": 1}, After: &durationpb.Duration{Seconds: -1, Nanos: 1}}}},
			codes.InvalidArgument, "steps[0].after"},
		{"bad headroom", &pb.StartRampRequest{AllowNewPool: true, Pool: "chat", Steps: step, AutoHold: &pb.AutoHold{MinHeadroomPct: 150}}, codes.InvalidArgument, "min_headroom_pct"},
		{"stale version", &pb.StartRampRequest{AllowNewPool: true, Pool: "chat", Steps: step, ExpectedVersion: 7}, codes.Aborted, "expected_version 7"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := e.Admin.StartRamp(ctx, tt.req)
			wantCode(t, err, tt.code, tt.msg)
		})
	}
	_, err := e.Admin.GetRamp(ctx, &pb.GetRampRequest{Pool: "chat"})
	wantCode(t, err, codes.NotFound, "never had a ramp")
	_, err = e.Admin.AbortRamp(ctx, &pb.AbortRampRequest{Pool: "chat"})
	wantCode(t, err, codes.NotFound, "never had a ramp")
}

// setWeights sets pool's weights on e and fails the test on an error.
func setWeights(e *servertest.Sidecar, pool string, w map[string]float64) {
	e.T.Helper()
	if _, err := e.Admin.SetWeights(context.Background(), &pb.SetWeightsRequest{AllowNewPool: true, Pool: pool, Weights: w}); err != nil {
		e.T.Fatal(err)
	}
}
