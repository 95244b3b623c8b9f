package server

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"

	"google.golang.org/grpc/status"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/frontend"
	"github.com/prefixroute/prefixroute/internal/auth"
	"github.com/prefixroute/prefixroute/internal/protoconv"
	"github.com/prefixroute/prefixroute/internal/state"
	"github.com/prefixroute/prefixroute/scheduler"
)

type pickService struct {
	pb.UnsafePickServiceServer
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
	return ps.s.PickFor(ctx, req, frontend.PickMeta{})
}

// pick decides req with the call's scratch and notes in rec what the
// observers read: the pool, the decision and its seed.
func (s *Server) pick(ctx context.Context, req *pb.PickRequest, sc *pickScratch, rec *pickRecord) (*pb.PickResponse, error) {
	if req.GetPool() == "" {
		return nil, invalid("pool is empty; name the pool to pick from")
	}
	pool, err := s.reg.Pool(req.GetPool())
	if err != nil {
		return nil, statusOf(s.missingPool(req.GetPool(), err))
	}
	rec.pool = pool.Name()
	if _, ok := pb.AuditLevel_name[int32(req.GetAudit())]; !ok {
		return nil, invalid("audit is %d, not an AuditLevel; want 0 (unspecified: full), 1 (full), 2 (chosen) or 3 (none)", int32(req.GetAudit()))
	}
	if err := checkTarget(req); err != nil {
		return nil, err
	}
	sc.in = state.PickInput{Hashes: req.GetPrefixHashes(), PromptTokens: req.GetPromptTokens(), Exclude: req.GetExcludeInstances(),
		ChosenOnly: chosenOnly(req, rec.logged), TTFTTargetMs: req.GetTtftSloMs()}
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
	if len(req.GetFlowId()) > auth.MaxFlowIDBytes {
		return nil, invalid("flow_id is %d bytes; at most %d", len(req.GetFlowId()), auth.MaxFlowIDBytes)
	}
	var hold flowHold
	if c := pool.Config(); c != nil && c.Policy.OnSaturation == scheduler.SaturationQueue {
		err = s.holdPick(ctx, pool, &c.Policy, req, sc, seed, &hold)
		if _, ok := status.FromError(err); ok && err != nil {
			return nil, err // left the queue without an instance
		}
	} else {
		sc.pcg.Seed(seed, seedStream)
		err = pool.Pick(s.opts.Now(), &sc.in, sc.rng, &sc.pick)
	}
	rec.pk, rec.decErr, rec.seed = &sc.pick, err, seed
	if err != nil {
		return nil, pickError(pool.Name(), &sc.pick, err)
	}
	s.repl.Picked(pool.Name(), &sc.pick, req.GetPrefixHashes())
	s.bookPick(pool.Name(), req.GetRequestId(), &sc.pick, req.GetPromptTokens())
	resp := pickResponseAt(req.GetAudit(), &sc.pick, seed, len(req.GetPrefixHashes()), req.GetPromptTokens())
	hold.audit(resp)
	if err := holdAnswer(ctx, pool.Name(), sc.pick.Hold, resp); err != nil {
		return nil, err
	}
	return resp, nil
}

// pickError turns a failed decision into a status whose message says why.
func pickError(pool string, pk *state.Pick, err error) error {
	d := &pk.Decision
	var msg string
	switch {
	case errors.Is(err, scheduler.ErrNoInstances):
		// The registry holds the pool: configured, or instances reported
		// into it. It answers as a pool warming up, retryable.
		return newStatus(state.ErrPoolWarming, fmt.Sprintf("pool %q is warming up: it has no instances (none has reported since the router started, or all were forgotten); retry in %d s",
			pool, protoconv.RetryAfterSeconds))
	case errors.Is(err, scheduler.ErrSLOUnattainable):
		return sloStatus(pool, pk)
	case errors.Is(err, scheduler.ErrSaturated):
		msg = fmt.Sprintf("pool %q is saturated: %s; the earliest instance drains in about %.1f ms (on_saturation: %v)",
			pool, d.ExcludedSummary(), d.DrainMs, pk.Config.Policy.OnSaturation)
	case errors.Is(err, scheduler.ErrNoEligibleInstance):
		msg = fmt.Sprintf("pool %q has no eligible instance: %s", pool, d.ExcludedSummary())
	case errors.Is(err, scheduler.ErrAllWeightsZero):
		msg = fmt.Sprintf("pool %q is drained: every deployment with eligible instances has weight 0 (weights version %d); raise a weight with 'prefixctl weights set' (SetWeights)",
			pool, pk.Config.WeightsVersion)
	default:
		msg = fmt.Sprintf("pool %q: %v", pool, err)
	}
	return newStatus(err, msg)
}

// chosenOnly reports whether the scheduler may compute the instance level
// of the drawn deployment only: the response lists no other instance
// (AUDIT_LEVEL_NONE or CHOSEN) and the decision log did not sample the call
// (it records the full audit).
func chosenOnly(req *pb.PickRequest, logged bool) bool {
	a := req.GetAudit()
	return !logged && (a == pb.AuditLevel_AUDIT_LEVEL_NONE || a == pb.AuditLevel_AUDIT_LEVEL_CHOSEN)
}

// pickResponse renders a decision with its full audit.
func pickResponse(pk *state.Pick, seed uint64, blocks int, promptTokens uint32) *pb.PickResponse {
	return pickResponseAt(pb.AuditLevel_AUDIT_LEVEL_FULL, pk, seed, blocks, promptTokens)
}

// pickResponseAt renders a decision with the audit the level asks for.
// Every message of the response comes from three allocations whatever the
// pool's size: the response with its decision and chosen instance in one
// block, and the deployments' messages and pointers in two; FULL adds two
// more for the instances. The policy's message is shared by the picks of
// an equal policy (protoconv.SharedPolicyProto).
func pickResponseAt(level pb.AuditLevel, pk *state.Pick, seed uint64, blocks int, promptTokens uint32) *pb.PickResponse {
	d := &pk.Decision
	snap := &pk.Snapshot
	chosen := &snap.Instances[d.Instance]
	if level == pb.AuditLevel_AUDIT_LEVEL_NONE {
		prefill, _ := protoconv.PDProto(pk, false)
		return &pb.PickResponse{Address: pk.Addresses[d.Instance], InstanceId: chosen.ID,
			Deployment: snap.Deployments[d.Deployment].Name, Prefill: prefill}
	}
	m := new(pickMessages)
	resp, dec := &m.resp, &m.dec
	resp.Address, resp.InstanceId, resp.Deployment = pk.Addresses[d.Instance], chosen.ID, snap.Deployments[d.Deployment].Name
	dec.Policy = protoconv.SharedPolicyProto(&pk.Config.Policy) // shared: read only
	dec.Strategy = dec.Policy.Strategy
	dec.DeploymentDraw, dec.InstanceDraw, dec.Seed = d.DeploymentDraw, d.InstanceDraw, seed
	dec.WeightsVersion, dec.Blocks, dec.PromptTokens = pk.Config.WeightsVersion, uint32(blocks), promptTokens
	dec.Saturated, dec.DrainMs = d.Saturated, d.DrainMs
	sloAudit(dec, pk)
	resp.Prefill, dec.Pd = protoconv.PDProto(pk, true)
	dec.UnknownInstances = uint32(d.Excluded[scheduler.ReasonStale]) // neither full nor free
	deps := make([]pb.DeploymentDecision, len(snap.Deployments))
	dec.Deployments = make([]*pb.DeploymentDecision, len(snap.Deployments))
	for i := range snap.Deployments {
		r, dd := &d.Deployments[i], &deps[i]
		dd.Deployment, dd.Weight, dd.HitRatio = snap.Deployments[i].Name, r.Weight, r.HitRatio
		dd.Probability, dd.ExcludedReason, dd.LoadMs = r.Probability, r.Reason.String(), r.LoadMs
		dd.MatchedBlocks, dd.EligibleInstances = uint32(r.MatchedBlocks), uint32(r.Eligible)
		dd.FullInstances, dd.Held = uint32(r.Full), r.Held
		calibAudit(dd, &snap.Deployments[i], &pk.Config.Policy)
		dec.Deployments[i] = dd
	}
	if level == pb.AuditLevel_AUDIT_LEVEL_CHOSEN {
		instanceDecision(&m.chosen, pk, d.Instance)
		m.instances[0] = &m.chosen
		dec.Instances = m.instances[:]
	} else {
		insts := make([]pb.InstanceDecision, len(snap.Instances))
		dec.Instances = make([]*pb.InstanceDecision, len(snap.Instances))
		for i := range insts {
			instanceDecision(&insts[i], pk, i)
			dec.Instances[i] = &insts[i]
		}
	}
	resp.Decision = dec
	return resp
}

// pickMessages holds the messages of one audited response, allocated
// together.
type pickMessages struct {
	resp      pb.PickResponse
	dec       pb.Decision
	chosen    pb.InstanceDecision
	instances [1]*pb.InstanceDecision
}

// instanceDecision fills dst with the audit of instance i of pk.
func instanceDecision(dst *pb.InstanceDecision, pk *state.Pick, i int) {
	in, r := &pk.Snapshot.Instances[i], &pk.Decision.Instances[i]
	dst.InstanceId, dst.Deployment, dst.Address = in.ID, pk.Snapshot.Deployments[in.Deployment].Name, pk.Addresses[i]
	dst.CostMs, dst.PrefillMs, dst.QueueMs, dst.BatchWaitMs = r.CostMs, r.PrefillMs, r.QueueMs, r.BatchWaitMs
	dst.MatchedBlocks, dst.Probability, dst.JointProbability = uint32(in.MatchedBlocks), r.Probability, r.Joint
	dst.ExcludedReason, dst.UncachedTokens = r.Reason.String(), r.UncachedTokens
	dst.PredictedTtftMs = r.PrefillMs + r.QueueMs + r.BatchWaitMs
	dst.PrefillWeight = pk.Decision.PrefillWeight
	dst.ShortLane = r.ShortLane
	dst.PrefillTokensPerSecond = in.PrefillTokensPerSecond
	if dst.PrefillTokensPerSecond == 0 {
		dst.PrefillTokensPerSecond = pk.Config.Policy.DefaultPrefillTokensPerSecond
	}
}
