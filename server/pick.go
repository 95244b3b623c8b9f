package server

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"

	"google.golang.org/grpc/status"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/internal/state"
	"github.com/prefixroute/prefixroute/scheduler"
)

type pickService struct {
	pb.UnimplementedPickServiceServer
	s *Server
}

// pickScratch is the reusable memory of one Pick call.
type pickScratch struct {
	pick      state.Pick
	in        state.PickInput
	overrides []state.Override
	pcg       *rand.PCG
	rng       *rand.Rand
}

func newPickScratch() *pickScratch {
	sc := &pickScratch{pcg: rand.NewPCG(0, 0)}
	sc.rng = rand.New(sc.pcg)
	return sc
}

// seedStream is the PCG stream constant; with the request's seed it fixes the
// draws.
const seedStream = 0x9e3779b97f4a7c15

// Pick implements PickService.Pick: PickFor with the gRPC call's context
// (its span, from otelgrpc, carries the caller's trace context).
func (ps *pickService) Pick(ctx context.Context, req *pb.PickRequest) (*pb.PickResponse, error) {
	return ps.s.PickFor(ctx, req, PickMeta{})
}

// pick decides req with the call's scratch and notes in rec what the
// observers read: the pool, the decision and its seed.
func (s *Server) pick(req *pb.PickRequest, sc *pickScratch, rec *pickRecord) (*pb.PickResponse, error) {
	if req.GetPool() == "" {
		return nil, invalid("pool is empty; name the pool to pick from")
	}
	pool, err := s.reg.Pool(req.GetPool())
	if err != nil {
		return nil, statusOf(err)
	}
	rec.pool = pool.Name()
	sc.in = state.PickInput{Hashes: req.GetPrefixHashes(), PromptTokens: req.GetPromptTokens(), Exclude: req.GetExcludeInstances()}
	sc.overrides = sc.overrides[:0]
	for _, l := range req.GetLoadSnapshot().GetInstances() {
		sc.overrides = append(sc.overrides, state.Override{
			Instance: l.GetInstanceId(), QueuedPrefillTokens: l.QueuedPrefillTokens, QueueMs: l.QueueMs,
			KVCacheUsage: l.KvCacheUsage, PrefillTokensPerSecond: l.PrefillTokensPerSecond, Draining: l.Draining,
		})
	}
	sc.in.Overrides = sc.overrides
	if err := s.reg.ValidatePick(&sc.in); err != nil {
		return nil, statusOf(err)
	}
	seed := rand.Uint64()
	if req.Seed != nil {
		seed = *req.Seed
	}
	sc.pcg.Seed(seed, seedStream)
	err = pool.Pick(s.opts.Now(), &sc.in, sc.rng, &sc.pick)
	rec.pk, rec.decErr, rec.seed = &sc.pick, err, seed
	if err != nil {
		return nil, pickError(pool.Name(), &sc.pick, err)
	}
	if s.repl != nil {
		s.repl.picked(pool.Name(), &sc.pick, req.GetPrefixHashes())
	}
	return pickResponseAt(req.GetAudit(), &sc.pick, seed, len(req.GetPrefixHashes()), req.GetPromptTokens()), nil
}

// pickError turns a failed decision into a status whose message says why.
func pickError(pool string, pk *state.Pick, err error) error {
	d := &pk.Decision
	var msg string
	switch {
	case errors.Is(err, scheduler.ErrNoInstances):
		msg = fmt.Sprintf("pool %q has no instances: none has reported yet, or all were forgotten", pool)
	case errors.Is(err, scheduler.ErrNoEligibleInstance):
		msg = fmt.Sprintf("pool %q has no eligible instance: %s", pool, d.ExcludedSummary())
	case errors.Is(err, scheduler.ErrAllWeightsZero):
		msg = fmt.Sprintf("pool %q is drained: every deployment with eligible instances has weight 0 (weights version %d); raise a weight with SetWeights",
			pool, pk.Config.WeightsVersion)
	default:
		msg = fmt.Sprintf("pool %q: %v", pool, err)
	}
	return status.Error(codeOf(err), msg)
}

// pickResponse renders a decision with its full audit.
func pickResponse(pk *state.Pick, seed uint64, blocks int, promptTokens uint32) *pb.PickResponse {
	return pickResponseAt(pb.AuditLevel_AUDIT_LEVEL_FULL, pk, seed, blocks, promptTokens)
}

// pickResponseAt renders a decision with the audit the level asks for.
func pickResponseAt(level pb.AuditLevel, pk *state.Pick, seed uint64, blocks int, promptTokens uint32) *pb.PickResponse {
	d := &pk.Decision
	snap := &pk.Snapshot
	chosen := &snap.Instances[d.Instance]
	resp := &pb.PickResponse{
		Address:    pk.Addresses[d.Instance],
		InstanceId: chosen.ID,
		Deployment: snap.Deployments[d.Deployment].Name,
	}
	if level == pb.AuditLevel_AUDIT_LEVEL_NONE {
		return resp
	}
	first, last := 0, len(snap.Instances)
	if level == pb.AuditLevel_AUDIT_LEVEL_CHOSEN {
		first, last = d.Instance, d.Instance+1
	}
	dec := &pb.Decision{
		Strategy:       strategyProto(pk.Config.Policy.Strategy),
		Policy:         policyProto(&pk.Config.Policy),
		DeploymentDraw: d.DeploymentDraw,
		InstanceDraw:   d.InstanceDraw,
		Seed:           seed,
		WeightsVersion: pk.Config.WeightsVersion,
		Deployments:    make([]*pb.DeploymentDecision, len(snap.Deployments)),
		Instances:      make([]*pb.InstanceDecision, 0, last-first),
		Blocks:         uint32(blocks),
		PromptTokens:   promptTokens,
	}
	for i := range snap.Deployments {
		r := &d.Deployments[i]
		dec.Deployments[i] = &pb.DeploymentDecision{
			Deployment: snap.Deployments[i].Name, Weight: r.Weight, HitRatio: r.HitRatio,
			Probability: r.Probability, ExcludedReason: r.Reason.String(),
			MatchedBlocks: uint32(r.MatchedBlocks), EligibleInstances: uint32(r.Eligible), LoadMs: r.LoadMs,
		}
	}
	for i := first; i < last; i++ {
		in, r := &snap.Instances[i], &d.Instances[i]
		dec.Instances = append(dec.Instances, &pb.InstanceDecision{
			InstanceId: in.ID, Deployment: snap.Deployments[in.Deployment].Name, Address: pk.Addresses[i],
			CostMs: r.CostMs, PrefillMs: r.PrefillMs, QueueMs: r.QueueMs, BatchWaitMs: r.BatchWaitMs,
			MatchedBlocks: uint32(in.MatchedBlocks), Probability: r.Probability, JointProbability: r.Joint,
			ExcludedReason: r.Reason.String(), UncachedTokens: r.UncachedTokens,
		})
	}
	resp.Decision = dec
	return resp
}
