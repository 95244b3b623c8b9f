package protoconv

import (
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

// invalidRamp is an error of a StartRamp request, wrapping
// rollout.ErrInvalidRamp.
func invalidRamp(format string, args ...any) error {
	return fmt.Errorf("%w: %s", rollout.ErrInvalidRamp, fmt.Sprintf(format, args...))
}

// RampSteps returns the steps a StartRamp asks for: Plan's linear steps, or
// the explicit ones.
func RampSteps(req *pb.StartRampRequest, start map[string]float64) ([]rollout.Step, error) {
	linear := req.GetTarget() != nil || req.GetDuration() != nil || req.GetStepInterval() != nil
	switch {
	case linear && len(req.GetSteps()) > 0:
		return nil, invalidRamp("give either target with duration and step_interval, or steps, not both")
	case !linear && len(req.GetSteps()) == 0:
		return nil, invalidRamp("no ramp given: set target, duration and step_interval, or steps")
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
		return nil, invalidRamp("target is empty; name the weights the ramp ends at")
	}
	if req.GetDuration() == nil || req.GetStepInterval() == nil {
		return nil, invalidRamp("a linear ramp needs both duration and step_interval")
	}
	var d, iv time.Duration
	if err := durationField(&d, "duration", req.GetDuration()); err != nil {
		return nil, err
	}
	if err := durationField(&iv, "step_interval", req.GetStepInterval()); err != nil {
		return nil, err
	}
	if err := store.ValidateWeights(req.GetTarget()); err != nil {
		return nil, invalidRamp("target: %v", err)
	}
	steps, err := rollout.Plan(start, req.GetTarget(), d, iv)
	if err != nil {
		return nil, err
	}
	return steps, nil
}

func durationField(dst *time.Duration, name string, v *durationpb.Duration) error {
	if err := v.CheckValid(); err != nil {
		return invalidRamp("%s: %v", name, err)
	}
	*dst = v.AsDuration()
	return nil
}

// AutoHoldOf checks a request's auto-hold and fills in the deployments it
// left empty: From loses and To gains the most share between start and
// target.
func AutoHoldOf(h *pb.AutoHold, start, target map[string]float64) (rollout.AutoHold, error) {
	if h == nil || h.GetMinHeadroomPct() == 0 {
		return rollout.AutoHold{}, nil
	}
	out := rollout.AutoHold{MinHeadroomPct: h.GetMinHeadroomPct(), From: h.GetFrom(), To: h.GetTo()}
	if !(out.MinHeadroomPct > 0 && out.MinHeadroomPct <= 100) {
		return out, invalidRamp("auto_hold.min_headroom_pct is %v; want a percentage in (0, 100]", out.MinHeadroomPct)
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
		return out, invalidRamp("auto_hold: from and to are both %q; name two deployments", out.From)
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

// RampProto renders a ramp at now.
func RampProto(r *rollout.Ramp, now time.Time) *pb.Ramp {
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
