package server

import (
	"context"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/internal/calib"
	"github.com/prefixroute/prefixroute/scheduler"
)

// GetSloCalibration implements AdminService.GetSloCalibration: the pool's
// policy prior and each deployment's fit (Server.Calibration), with
// whether its picks use it. NotFound for a pool the router does not know.
func (as *adminService) GetSloCalibration(ctx context.Context, req *pb.GetSloCalibrationRequest) (*pb.GetSloCalibrationResponse, error) {
	pool, err := as.pool(req.GetPool())
	if err != nil {
		return nil, err
	}
	pol := &pool.Config().Policy
	resp := &pb.GetSloCalibrationResponse{Pool: pool.Name(), PriorDoublingContextTokens: pol.DoublingContextTokens,
		MinSamples: calib.MinSamples, Calibration: pb.SloCalibration_SLO_CALIBRATION_APPLY}
	if pol.Calibration == scheduler.CalibrationObserve {
		resp.Calibration = pb.SloCalibration_SLO_CALIBRATION_OBSERVE
	}
	for _, d := range as.s.Calibration(pool.Name()) {
		resp.Deployments = append(resp.Deployments, &pb.SloDeploymentCalibration{Deployment: d.Deployment, Version: d.Version,
			Accepted: d.Accepted, Ignored: d.Ignored, Clipped: d.Clipped, PrefillScale: d.PrefillScale,
			DoublingContextTokens: d.DoublingContextTokens, QueueScale: d.QueueScale, MeanAbsRelResidual: d.MeanAbsRelResidual,
			InUse: d.Version > 0 && pol.Calibration == scheduler.CalibrationApply && pool.Calibration(d.Deployment).Version == d.Version})
	}
	return resp, nil
}
