package server

import (
	"context"
	"fmt"
	"maps"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/internal/protoconv"
	"github.com/prefixroute/prefixroute/internal/store"
)

// StartRamp implements AdminService.StartRamp.
func (as *adminService) StartRamp(ctx context.Context, req *pb.StartRampRequest) (*pb.StartRampResponse, error) {
	s := as.s
	var override string
	pc, err := s.changeNoted(ctx, req.GetPool(), req.GetAllowNewPool(), func() (store.Edit, string, error) {
		start, version := s.weightsInForce(req.GetPool())
		steps, err := protoconv.RampSteps(req, start)
		if err != nil {
			return store.Edit{}, "", statusOf(err)
		}
		hold, err := protoconv.AutoHoldOf(req.GetAutoHold(), start, steps[len(steps)-1].Weights)
		if err != nil {
			return store.Edit{}, "", statusOf(err)
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
	return &pb.StartRampResponse{Ramp: protoconv.RampProto(r, s.opts.Now())}, nil
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

// GetRamp implements AdminService.GetRamp.
func (as *adminService) GetRamp(ctx context.Context, req *pb.GetRampRequest) (*pb.GetRampResponse, error) {
	if err := checkPoolName(req.GetPool()); err != nil {
		return nil, err
	}
	pc, ok := as.s.store.Pool(req.GetPool())
	if !ok || pc.Ramp == nil {
		return nil, statusOf(fmt.Errorf("%w: pool %q never had a ramp; start one with 'prefixctl ramp start' (StartRamp)", store.ErrNoRamp, req.GetPool()))
	}
	return &pb.GetRampResponse{Ramp: protoconv.RampProto(pc.Ramp, as.s.opts.Now())}, nil
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
	return protoconv.RampProto(pc.Ramp, s.opts.Now()), nil
}
