package server

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/internal/rollout"
	"github.com/prefixroute/prefixroute/internal/store"
)

// StartRamp implements AdminService.StartRamp.
func (as *adminService) StartRamp(ctx context.Context, req *pb.StartRampRequest) (*pb.StartRampResponse, error) {
	s := as.s
	var override string
	pc, err := s.changeNoted(ctx, req.GetPool(), req.GetAllowNewPool(), func() (store.Edit, string, error) {
		start, version := s.weightsInForce(req.GetPool())
		steps, err := rampSteps(req, start)
		if err != nil {
			return store.Edit{}, "", err
		}
		hold, err := autoHoldOf(req.GetAutoHold(), start, steps[len(steps)-1].Weights)
		if err != nil {
			return store.Edit{}, "", err
		}
		weights := make([]map[string]float64, len(steps))
		for i, st := range steps {
			weights[i] = st.Weights
		}
		if override, err = s.guardWeights(req.GetPool(), req.GetAllowDrain(), "prefixctl ramp start", weights...); err != nil {
			return store.Edit{}, "", err
		}
		if req.GetExpectedVersion() != 0 {
			version = req.GetExpectedVersion()
		}
		e, err := store.StartRampEdit(req.GetPool(), start, steps, hold, req.GetAllowDrain(), version, withOverride(caller(ctx), override))
		return e, override, err
	})
	if err != nil {
		return nil, err
	}
	if override != "" {
		s.log.Warn("ramp started past the drain guard (allow_drain)", "pool", req.GetPool(), "override", override, "caller", caller(ctx))
	}
	r := pc.Ramp
	s.log.Info("ramp started", "pool", req.GetPool(), "ramp", r.ID, "steps", len(r.Steps),
		"first_step_at", r.NextAt, "target", r.Target(), "caller", caller(ctx))
	return &pb.StartRampResponse{Ramp: rampProto(r, s.opts.Now())}, nil
}

// weightsInForce returns the weights a ramp of pool starts from: every
// known deployment's weight in force (the equal split when none was set),
// and the weights version they come from. Called with adminMu held.
func (s *Server) weightsInForce(pool string) (map[string]float64, uint64) {
	pc, _ := s.store.Pool(pool)
	p, err := s.reg.Pool(pool)
	if err != nil {
		return maps.Clone(pc.Weights), pc.WeightsVersion
	}
	w := make(map[string]float64)
	for _, d := range p.Deployments() {
		w[d.Deployment] = d.Weight
	}
	return w, pc.WeightsVersion
}

// rampSteps returns the steps a StartRamp asks for: Plan's linear steps, or
// the explicit ones.
func rampSteps(req *pb.StartRampRequest, start map[string]float64) ([]rollout.Step, error) {
	linear := req.GetTarget() != nil || req.GetDuration() != nil || req.GetStepInterval() != nil
	switch {
	case linear && len(req.GetSteps()) > 0:
		return nil, invalid("give either target with duration and step_interval, or steps, not both")
	case !linear && len(req.GetSteps()) == 0:
		return nil, invalid("no ramp given: set target, duration and step_interval, or steps")
	case !linear:
		steps := make([]rollout.Step, len(req.GetSteps()))
		for i, st := range req.GetSteps() {
			var after time.Duration
			if err := durationField(&after, fmt.Sprintf("steps[%d].after", i), st.GetAfter()); err != nil {
				return nil, err
			}
			steps[i] = rollout.Step{Weights: maps.Clone(st.GetWeights()), After: after}
		}
		return steps, nil
	}
	if len(req.GetTarget()) == 0 {
		return nil, invalid("target is empty; name the weights the ramp ends at")
	}
	if req.GetDuration() == nil || req.GetStepInterval() == nil {
		return nil, invalid("a linear ramp needs both duration and step_interval")
	}
	var d, iv time.Duration
	if err := durationField(&d, "duration", req.GetDuration()); err != nil {
		return nil, err
	}
	if err := durationField(&iv, "step_interval", req.GetStepInterval()); err != nil {
		return nil, err
	}
	if err := store.ValidateWeights(req.GetTarget()); err != nil {
		return nil, invalid("target: %v", err)
	}
	steps, err := rollout.Plan(start, req.GetTarget(), d, iv)
	if err != nil {
		return nil, statusOf(err)
	}
	return steps, nil
}

func durationField(dst *time.Duration, name string, v *durationpb.Duration) error {
	if err := v.CheckValid(); err != nil {
		return invalid("%s: %v", name, err)
	}
	*dst = v.AsDuration()
	return nil
}

// autoHoldOf checks a request's auto-hold and fills in the deployments it
// left empty: From loses and To gains the most share between start and
// target.
func autoHoldOf(h *pb.AutoHold, start, target map[string]float64) (rollout.AutoHold, error) {
	if h == nil || h.GetMinHeadroomPct() == 0 {
		return rollout.AutoHold{}, nil
	}
	out := rollout.AutoHold{MinHeadroomPct: h.GetMinHeadroomPct(), From: h.GetFrom(), To: h.GetTo()}
	if !(out.MinHeadroomPct > 0 && out.MinHeadroomPct <= 100) {
		return out, invalid("auto_hold.min_headroom_pct is %v; want a percentage in (0, 100]", out.MinHeadroomPct)
	}
	ss, ts := shares(start), shares(target)
	fall, rise := math.Inf(-1), math.Inf(-1)
	from, to := "", ""
	for _, d := range slices.Sorted(maps.Keys(unionKeys(ss, ts))) {
		if delta := ts[d] - ss[d]; delta > rise {
			to, rise = d, delta
		}
		if delta := ss[d] - ts[d]; delta > fall {
			from, fall = d, delta
		}
	}
	if out.From == "" {
		out.From = from
	}
	if out.To == "" {
		out.To = to
	}
	if out.From == out.To {
		return out, invalid("auto_hold: from and to are both %q; name two deployments", out.From)
	}
	return out, nil
}

func shares(w map[string]float64) map[string]float64 {
	var sum float64
	for _, v := range w {
		sum += v
	}
	out := make(map[string]float64, len(w))
	for d, v := range w {
		if sum > 0 {
			out[d] = v / sum
		} else {
			out[d] = 0
		}
	}
	return out
}

func unionKeys(a, b map[string]float64) map[string]struct{} {
	out := make(map[string]struct{}, len(a)+len(b))
	for k := range a {
		out[k] = struct{}{}
	}
	for k := range b {
		out[k] = struct{}{}
	}
	return out
}

// GetRamp implements AdminService.GetRamp.
func (as *adminService) GetRamp(ctx context.Context, req *pb.GetRampRequest) (*pb.GetRampResponse, error) {
	if err := checkPoolName(req.GetPool()); err != nil {
		return nil, err
	}
	pc, ok := as.s.store.Pool(req.GetPool())
	if !ok || pc.Ramp == nil {
		return nil, statusOf(fmt.Errorf("%w: pool %q never had a ramp; start one with 'prefixctl ramp start' (StartRamp)", store.ErrNoRamp, req.GetPool()))
	}
	return &pb.GetRampResponse{Ramp: rampProto(pc.Ramp, as.s.opts.Now())}, nil
}

// PauseRamp implements AdminService.PauseRamp.
func (as *adminService) PauseRamp(ctx context.Context, req *pb.PauseRampRequest) (*pb.PauseRampResponse, error) {
	r, err := as.s.updateRamp(ctx, req.GetPool(), req.GetRampId(), store.RampPause, "paused by "+caller(ctx))
	return &pb.PauseRampResponse{Ramp: r}, err
}

// ResumeRamp implements AdminService.ResumeRamp.
func (as *adminService) ResumeRamp(ctx context.Context, req *pb.ResumeRampRequest) (*pb.ResumeRampResponse, error) {
	r, err := as.s.updateRamp(ctx, req.GetPool(), req.GetRampId(), store.RampResume, "resumed by "+caller(ctx))
	return &pb.ResumeRampResponse{Ramp: r}, err
}

// AbortRamp implements AdminService.AbortRamp.
func (as *adminService) AbortRamp(ctx context.Context, req *pb.AbortRampRequest) (*pb.AbortRampResponse, error) {
	r, err := as.s.updateRamp(ctx, req.GetPool(), req.GetRampId(), store.RampAbort, "aborted by "+caller(ctx))
	return &pb.AbortRampResponse{Ramp: r}, err
}

// updateRamp applies op (store.RampPause, RampResume, RampAbort) to the
// pool's ramp id through the admin write path, and renders the ramp.
func (s *Server) updateRamp(ctx context.Context, pool string, id uint64, op, reason string) (*pb.Ramp, error) {
	pc, err := s.change(ctx, pool, true, func() (store.Edit, error) { return store.UpdateRampEdit(pool, id, op, reason) })
	if err != nil {
		return nil, err
	}
	s.log.Info("ramp "+op, "pool", pool, "ramp", pc.Ramp.ID, "step", pc.Ramp.Applied, "steps", len(pc.Ramp.Steps),
		"weights", pc.Weights, "caller", caller(ctx))
	return rampProto(pc.Ramp, s.opts.Now()), nil
}

// rampProto renders a ramp at now.
func rampProto(r *rollout.Ramp, now time.Time) *pb.Ramp {
	if r == nil {
		return nil
	}
	out := &pb.Ramp{
		Id: r.ID, State: rampStateProto(r.State), Start: maps.Clone(r.Start), StepsApplied: uint32(r.Applied),
		Current: maps.Clone(r.Current()), Target: maps.Clone(r.Target()),
		UntilDone: durationpb.New(r.Remains(now)), StartedAt: timestamppb.New(r.StartedAt), StartedBy: r.StartedBy,
		UpdatedAt: timestamppb.New(r.UpdatedAt), Reason: r.Reason, AllowDrain: r.AllowDrain,
	}
	for _, st := range r.Steps {
		out.Steps = append(out.Steps, &pb.RampStep{Weights: maps.Clone(st.Weights), After: durationpb.New(st.After)})
	}
	switch r.State {
	case rollout.Running:
		out.NextStepAt = timestamppb.New(r.NextAt)
		out.UntilNext = durationpb.New(max(0, r.NextAt.Sub(now)))
	case rollout.Paused:
		out.UntilNext = durationpb.New(r.Remaining)
	}
	if h := r.AutoHold; h.MinHeadroomPct > 0 {
		out.AutoHold = &pb.AutoHold{MinHeadroomPct: h.MinHeadroomPct, From: h.From, To: h.To}
	}
	return out
}

func rampStateProto(s rollout.State) pb.RampState {
	switch s {
	case rollout.Running:
		return pb.RampState_RAMP_STATE_RUNNING
	case rollout.Paused:
		return pb.RampState_RAMP_STATE_PAUSED
	case rollout.Done:
		return pb.RampState_RAMP_STATE_DONE
	case rollout.Aborted:
		return pb.RampState_RAMP_STATE_ABORTED
	}
	return pb.RampState_RAMP_STATE_UNSPECIFIED
}
