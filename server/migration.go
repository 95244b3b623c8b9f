package server

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/internal/readiness"
	"github.com/prefixroute/prefixroute/internal/rollout"
)

// GetMigrationStatus implements AdminService.GetMigrationStatus.
func (as *adminService) GetMigrationStatus(ctx context.Context, req *pb.GetMigrationStatusRequest) (*pb.GetMigrationStatusResponse, error) {
	pool, err := as.pool(req.GetPool())
	if err != nil {
		return nil, err
	}
	if req.GetFrom() == "" || req.GetTo() == "" {
		return nil, invalid("from and to are required: name the deployment to retire and the one to take its traffic")
	}
	if req.GetTopK() > readiness.MaxTopK {
		return nil, invalid("top_k is %d; the limit is %d", req.GetTopK(), readiness.MaxTopK)
	}
	st, err := pool.Migration(as.s.opts.Now(), readiness.Query{From: req.GetFrom(), To: req.GetTo(), TopK: int(req.GetTopK())})
	if err != nil {
		return nil, migrationError(req.GetPool(), err)
	}
	return migrationProto(req.GetPool(), &st), nil
}

// migrationError maps the tracker's errors (codeOf): a deployment the pool
// does not know is NotFound, with a hint; a bad query InvalidArgument.
func migrationError(pool string, err error) error {
	if errors.Is(err, readiness.ErrUnknownDeployment) {
		return status.Error(codeOf(err), fmt.Sprintf("pool %q: %v; list them with 'prefixctl weights get %s'", pool, err, pool))
	}
	return statusOf(err)
}

func migrationProto(pool string, st *readiness.Status) *pb.GetMigrationStatusResponse {
	m := &st.Migration
	out := &pb.GetMigrationStatusResponse{
		Pool: pool, From: m.From, To: m.To, Window: durationpb.New(st.Window), Covered: durationpb.New(st.Covered),
		Picks: st.Picks, UntrackedPicks: st.UntrackedPicks,
		FromOnlyRequestShare: m.CachedRequestShare, FromOnlyTokenShare: m.CachedPromptShare,
		Absorption: &pb.Absorption{
			ToFraction: m.ToFraction, MovedPrefillTokensPerSecond: m.MovedPrefillTokensPerSec,
			RecomputeTokens: m.RecomputeTokens, RecomputeTokensPerSecond: m.RecomputeTokensPerSec,
			ExtraTokensPerSecond: m.ExtraTokensPerSec, ExtraPrefillMsPerSecond: m.ExtraPrefillMsPerSec,
			ThroughputKnown: m.ExtraPrefillMsKnown, ToPrefillMsPerSecond: m.ToPrefillMsPerSec,
			ToCapacityMsPerSecond: m.ToCapacityMsPerSec, HeadroomPct: m.HeadroomPct, CanAbsorb: m.CanAbsorb && st.SampleMissing() == "",
		},
		SampleMissing: st.SampleMissing(),
	}
	for _, d := range st.Deployments {
		out.Deployments = append(out.Deployments, &pb.DeploymentTraffic{
			Deployment: d.Name, Weight: d.Weight, WeightShare: d.WeightShare, Picks: d.Picks, TrafficShare: d.TrafficShare,
			HitRatio: d.HitRatio, PrefillTokensPerSecond: d.PrefillTokensPerSec, PrefillMsPerSecond: d.PrefillMsPerSec,
			ThroughputTokensPerSecond: d.ThroughputTokensPerSec, Instances: uint32(d.Instances), Missing: d.Missing,
		})
	}
	for _, h := range st.HotPrefixes {
		out.HotPrefixes = append(out.HotPrefixes, &pb.HotPrefix{
			FirstBlockHash: h.FirstBlockHash, DepthFromBlocks: uint32(h.DepthFrom), DepthToBlocks: uint32(h.DepthTo),
			Requests: h.Requests, ExtraTokens: h.ExtraTokens,
		})
	}
	return out
}

// holdReason returns why auto-hold should pause r before its next step, or
// "" to go on (rollout.Ramp.HoldReason), from the pool's migration estimate
// of moving From's traffic to To. A pool the registry no longer holds goes
// on.
func (s *Server) holdReason(pool string, r *rollout.Ramp) string {
	if !r.HoldApplies() {
		return ""
	}
	p, err := s.reg.Pool(pool)
	if err != nil {
		return ""
	}
	h := r.AutoHold
	st, err := p.Migration(s.opts.Now(), readiness.Query{From: h.From, To: h.To, TopK: 1})
	m := &st.Migration
	return r.HoldReason(rollout.ToLoad{Known: m.ExtraPrefillMsKnown, PrefillMsPerSec: m.ToPrefillMsPerSec,
		CapacityMsPerSec: m.ToCapacityMsPerSec, ExtraPrefillMsPerSec: m.ExtraPrefillMsPerSec, Missing: m.ToMissing}, err)
}
