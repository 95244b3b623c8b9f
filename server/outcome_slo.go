package server

import (
	"fmt"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/internal/protoconv"
	"github.com/prefixroute/prefixroute/internal/state"
	"github.com/prefixroute/prefixroute/scheduler"
)

// checkTarget validates PickRequest.ttft_slo_ms: 0 (none) or a number of
// ms in (0, scheduler.MaxTTFTTargetMs].
func checkTarget(req *pb.PickRequest) error {
	if t := req.GetTtftSloMs(); t != 0 && !(t > 0 && t <= scheduler.MaxTTFTTargetMs) {
		return invalid("ttft_slo_ms is %v; want 0 (no target) or a number of ms in (0, %d]", t, scheduler.MaxTTFTTargetMs)
	}
	return nil
}

// sloStatus is the RESOURCE_EXHAUSTED answer of a pick shed for its TTFT
// target (scheduler.ErrSLOUnattainable), with the best predicted TTFT.
func sloStatus(pool string, pk *state.Pick) error {
	d := &pk.Decision
	msg := fmt.Sprintf("pool %q cannot meet ttft_slo_ms %g: the best predicted TTFT of an eligible instance is %.1f ms (on_slo_miss: shed)",
		pool, d.TTFTTargetMs, d.SLOBestMs)
	return protoconv.SLOUnattainable(msg, pool, d.TTFTTargetMs, d.SLOBestMs).Err()
}

// sloAudit fills the decision's target, whether the pick met it by
// prediction, and the chosen deployment's calibration version.
func sloAudit(dec *pb.Decision, pk *state.Pick) {
	d := &pk.Decision
	dec.TtftSloMs, dec.SloMet = d.TTFTTargetMs, d.SLOMet
	if pk.Config.Policy.Calibration == scheduler.CalibrationApply {
		dec.CalibrationVersion = pk.Snapshot.Deployments[d.Deployment].Calibration.Version
	}
}

// calibAudit fills a deployment's prefill model as the decision priced it.
func calibAudit(dd *pb.DeploymentDecision, dep *scheduler.Deployment, pol *scheduler.Policy) {
	if c := &dep.Calibration; c.Version > 0 && pol.Calibration == scheduler.CalibrationApply {
		dd.PrefillScale, dd.DoublingContextTokens, dd.CalibrationVersion = c.PrefillScale, c.DoublingContextTokens, c.Version
		return
	}
	dd.PrefillScale, dd.DoublingContextTokens = 1, pol.DoublingContextTokens
}
