package server

import (
	"context"
	"maps"

	"google.golang.org/grpc/peer"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/internal/auth"
	"github.com/prefixroute/prefixroute/internal/protoconv"
	"github.com/prefixroute/prefixroute/internal/state"
	"github.com/prefixroute/prefixroute/internal/store"
	"github.com/prefixroute/prefixroute/scheduler"
)

type adminService struct {
	pb.UnsafeAdminServiceServer
	s *Server
}

// caller names who made an admin call, for the audit log and the logs: the
// authenticated identity and how it was proved, with the peer address
// ("alice via cert from 10.0.0.7:51234"); the peer address alone when
// authentication is off.
func caller(ctx context.Context) string {
	addr := "unknown"
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		addr = p.Addr.String()
	}
	if c := auth.CallerFrom(ctx); c != nil {
		return c.Name + " via " + c.Via + " from " + addr
	}
	return addr
}

// SetWeights implements AdminService.SetWeights.
func (as *adminService) SetWeights(ctx context.Context, req *pb.SetWeightsRequest) (*pb.SetWeightsResponse, error) {
	s := as.s
	var override string
	pc, err := s.changeNoted(ctx, req.GetPool(), req.GetAllowNewPool(), func() (store.Edit, string, error) {
		e, err := store.WeightsEdit(req.GetPool(), req.GetWeights(), req.GetExpectedVersion())
		if err != nil {
			return e, "", err
		}
		override, err = s.guardWeights(req.GetPool(), req.GetAllowDrain(), "prefixctl weights set", req.GetWeights())
		return e, override, err
	})
	if err != nil {
		return nil, err
	}
	if override != "" {
		s.log.Warn("weights set past the drain guard (allow_drain)", "pool", req.GetPool(), "weights_version", pc.WeightsVersion,
			"override", override, "caller", caller(ctx))
	}
	drained := true
	for _, w := range pc.Weights {
		drained = drained && w == 0
	}
	if drained {
		s.log.Warn("pool fully drained: every weight is 0; picks fail with FailedPrecondition until a weight is raised",
			"pool", req.GetPool(), "weights_version", pc.WeightsVersion, "caller", caller(ctx))
	} else {
		s.log.Info("weights set", "pool", req.GetPool(), "weights_version", pc.WeightsVersion,
			"weights", pc.Weights, "caller", caller(ctx))
	}
	return &pb.SetWeightsResponse{Version: pc.WeightsVersion, Weights: maps.Clone(pc.Weights)}, nil
}

// GetWeights implements AdminService.GetWeights.
func (as *adminService) GetWeights(ctx context.Context, req *pb.GetWeightsRequest) (*pb.GetWeightsResponse, error) {
	pool, err := as.pool(req.GetPool())
	if err != nil {
		return nil, err
	}
	cfg := pool.Config()
	resp := &pb.GetWeightsResponse{Version: cfg.WeightsVersion, Weights: maps.Clone(cfg.Weights), WeightsSet: cfg.Weights != nil}
	if pc, ok := as.s.store.Pool(req.GetPool()); ok {
		resp.Ramp = protoconv.RampProto(pc.Ramp, as.s.opts.Now())
	}
	for _, d := range pool.Deployments() {
		resp.Deployments = append(resp.Deployments, &pb.DeploymentWeight{
			Deployment: d.Deployment, Weight: d.Weight, Share: d.Share, Configured: d.Configured, Instances: uint32(d.Instances),
		})
	}
	return resp, nil
}

// SetPolicy implements AdminService.SetPolicy.
func (as *adminService) SetPolicy(ctx context.Context, req *pb.SetPolicyRequest) (*pb.SetPolicyResponse, error) {
	s := as.s
	pc, err := s.change(ctx, req.GetPool(), req.GetAllowNewPool(), func() (store.Edit, error) {
		return store.PolicyMergeEdit(req.GetPool(), func(base scheduler.Policy) (scheduler.Policy, error) {
			return mergePolicy(base, req.GetPolicy())
		})
	})
	if err != nil {
		return nil, err
	}
	s.log.Info("policy set", "pool", req.GetPool(), "policy_version", pc.PolicyVersion, "caller", caller(ctx))
	return &pb.SetPolicyResponse{Policy: policyProto(pc.Policy), Version: pc.PolicyVersion}, nil
}

// GetPolicy implements AdminService.GetPolicy.
func (as *adminService) GetPolicy(ctx context.Context, req *pb.GetPolicyRequest) (*pb.GetPolicyResponse, error) {
	pool, err := as.pool(req.GetPool())
	if err != nil {
		return nil, err
	}
	cfg := pool.Config()
	return &pb.GetPolicyResponse{Policy: policyProto(&cfg.Policy), Version: cfg.PolicyVersion}, nil
}

// ListInstances implements AdminService.ListInstances.
func (as *adminService) ListInstances(ctx context.Context, req *pb.ListInstancesRequest) (*pb.ListInstancesResponse, error) {
	pool, err := as.pool(req.GetPool())
	if err != nil {
		return nil, err
	}
	resp := &pb.ListInstancesResponse{}
	for _, in := range pool.Instances(as.s.opts.Now()) {
		st := &pb.InstanceStatus{
			InstanceId: in.Instance, Deployment: in.Deployment, Address: in.Address,
			State: instanceStateProto(in.State), ReportAgeMs: float64(in.ReportAge.Microseconds()) / 1000,
			LastSeq: in.Last.Seq, RunningRequests: in.Last.RunningRequests, WaitingRequests: in.Last.WaitingRequests,
			QueuedPrefillTokens: in.Last.QueuedPrefillTokens, KvCacheUsage: in.Last.KVCacheUsage,
			KvCapacityBlocks: in.Last.KVCapacityBlocks, PrefillTokensPerSecond: in.Last.PrefillTokensPerSecond,
			BlockSizeTokens: in.Last.BlockSizeTokens, ReportsCacheEvents: in.Last.ReportsCacheEvents,
			CachedBlocks: uint64(in.CachedBlocks), AssignedTokens: in.AssignedTokens, AssignedKvBlocks: in.AssignedKVBlocks,
			UnreachableBackoffLeftMs: float64(in.BackoffLeft.Microseconds()) / 1000, Role: protoconv.RoleProto(in.Last.Role),
		}
		if in.Last.HasQueueMs {
			st.QueueMs = &in.Last.QueueMs
		}
		resp.Instances = append(resp.Instances, st)
	}
	return resp, nil
}

// ListPools implements AdminService.ListPools.
func (as *adminService) ListPools(ctx context.Context, req *pb.ListPoolsRequest) (*pb.ListPoolsResponse, error) {
	resp := &pb.ListPoolsResponse{}
	for _, p := range as.s.reg.Pools() {
		deps, insts := p.Counts()
		resp.Pools = append(resp.Pools, &pb.PoolSummary{
			Pool: p.Name(), Deployments: uint32(deps), Instances: uint32(insts), WeightsVersion: p.Config().WeightsVersion,
		})
	}
	return resp, nil
}

func (as *adminService) pool(name string) (*state.Pool, error) {
	if err := checkPoolName(name); err != nil {
		return nil, err
	}
	p, err := as.s.reg.Pool(name)
	if err != nil {
		return nil, statusOf(err)
	}
	return p, nil
}

// change is an admin call's configuration write: it checks the pool's
// name and, under adminMu, that the router knows the pool unless allowNew
// (knownPool; else state.ErrPoolNotFound, naming the flag that creates
// it) and that the registry can hold it (the pool limit), then goes the
// one path of every write (write) with the caller in the audit log. Its
// errors are statuses: edit's own, or the core's mapped through codeOf.
func (s *Server) change(ctx context.Context, pool string, allowNew bool, edit func() (store.Edit, error)) (store.PoolConfig, error) {
	return s.changeNoted(ctx, pool, allowNew, func() (store.Edit, string, error) {
		e, err := edit()
		return e, "", err
	})
}

// changeNoted is change with an edit that may return a note for the audit
// log's caller: what a guard let through because the request overrode it
// (withOverride).
func (s *Server) changeNoted(ctx context.Context, pool string, allowNew bool, edit func() (store.Edit, string, error)) (store.PoolConfig, error) {
	if err := checkPoolName(pool); err != nil {
		return store.PoolConfig{}, err
	}
	pc, _, err := s.write(pool, caller(ctx), func() (store.Edit, string, error) {
		if !allowNew && !s.knownPool(pool) {
			return store.Edit{}, "", newPoolRefused(pool)
		}
		if err := s.reg.CanHold(pool); err != nil {
			return store.Edit{}, "", err
		}
		return edit()
	})
	if err != nil {
		return store.PoolConfig{}, statusOf(err)
	}
	return pc, nil
}

// write is the one path of every configuration write, an admin call's
// (changeNoted) and the ramp driver's (stepRamp): under adminMu, it builds
// the edit with edit (which may read the configuration in force, and
// refuse), stores it through the Replicator (in the data dir, or the
// cluster's bucket; the audit log names by, with edit's note), and puts
// the result in force (install). stored says whether the change was
// stored: an error with stored set is an install failure, the change
// stored but not in force here. Errors are unmapped.
func (s *Server) write(pool, by string, edit func() (store.Edit, string, error)) (pc store.PoolConfig, stored bool, err error) {
	s.adminMu.Lock()
	defer s.adminMu.Unlock()
	e, note, err := edit()
	if err != nil {
		return store.PoolConfig{}, false, err
	}
	if pc, err = s.applyEdit(pool, e, withOverride(by, note)); err != nil {
		return store.PoolConfig{}, false, err
	}
	return pc, true, s.install(pool, pc)
}

// install makes a durably stored configuration the pool's configuration in
// force, in the live state (it tells no one else: replication is the
// Replicator's). Called with adminMu held, so installs follow store order.
func (s *Server) install(name string, pc store.PoolConfig) error {
	pool, err := s.reg.Ensure(name)
	if err != nil {
		return statusOf(err)
	}
	if s.obs == nil {
		pool.SetConfig(configOf(pc))
		return nil
	}
	before := pool.Deployments()
	pool.SetConfig(configOf(pc))
	s.obs.published(name, before, pc, pool.Deployments()) // the console's markers
	return nil
}

func checkPoolName(pool string) error {
	if pool == "" {
		return invalid("pool is empty; name the pool")
	}
	return nil
}

func instanceStateProto(s state.InstanceState) pb.InstanceState {
	switch s {
	case state.StateOK:
		return pb.InstanceState_INSTANCE_STATE_OK
	case state.StateStale:
		return pb.InstanceState_INSTANCE_STATE_STALE
	case state.StateDraining:
		return pb.InstanceState_INSTANCE_STATE_DRAINING
	case state.StateDisconnected:
		return pb.InstanceState_INSTANCE_STATE_DISCONNECTED
	case state.StateUnreachable:
		return pb.InstanceState_INSTANCE_STATE_UNREACHABLE
	}
	return pb.InstanceState_INSTANCE_STATE_UNSPECIFIED
}
