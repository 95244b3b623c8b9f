// Package protoconv converts the API's messages to and from the core's
// types, so that a field added to a message is carried the same way by
// every caller:
//
//   - the load report (pb.ReportLoadRequest ↔ state.Report), which the
//     LoadService handler (server) reads from an instance's stream and the
//     replication (internal/replica) from another replica's cluster events
//     and snapshots;
//   - the policy (pb.Policy ↔ scheduler.Policy), field by field as
//     scheduler.PolicyFields lists them, for the admin service, the Pick
//     audit and the simulator's live mode.
//
// Safe for concurrent use.
package protoconv

import (
	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/internal/state"
	"github.com/prefixroute/prefixroute/scheduler"
)

// ReportOf fills rep from m and validates it against reg's limits
// (state.Registry.ValidateReport). rep's block hash slices alias m's.
func ReportOf(reg *state.Registry, m *pb.ReportLoadRequest, rep *state.Report) error {
	*rep = state.Report{
		Seq: m.GetSeq(), RunningRequests: m.GetRunningRequests(), WaitingRequests: m.GetWaitingRequests(),
		QueuedPrefillTokens: m.GetQueuedPrefillTokens(), QueueMs: m.GetQueueMs(), HasQueueMs: m.QueueMs != nil,
		KVCacheUsage: m.GetKvCacheUsage(), KVCapacityBlocks: m.GetKvCapacityBlocks(),
		PrefillTokensPerSecond: m.GetPrefillTokensPerSecond(), BlockSizeTokens: m.GetBlockSizeTokens(),
		Draining: m.GetDraining(), ReportsCacheEvents: m.GetReportsCacheEvents(), CacheCleared: m.GetCacheCleared(),
		Stored: m.GetStoredBlockHashes(), Removed: m.GetRemovedBlockHashes(),
		Role: roleOf(m.GetRole()),
	}
	return reg.ValidateReport(rep)
}

// roleOf is the scheduler role of a report's role; an unknown value maps
// past scheduler.RoleDecode, which ValidateReport refuses.
func roleOf(r pb.PdRole) scheduler.Role {
	switch r {
	case pb.PdRole_PD_ROLE_UNSPECIFIED, pb.PdRole_PD_ROLE_BOTH:
		return scheduler.RoleBoth
	case pb.PdRole_PD_ROLE_PREFILL:
		return scheduler.RolePrefill
	case pb.PdRole_PD_ROLE_DECODE:
		return scheduler.RoleDecode
	}
	return scheduler.Role(min(max(int32(r), 0), 255)) //nolint:gosec // bounded
}

// RoleProto is the report message's value of role.
func RoleProto(r scheduler.Role) pb.PdRole {
	switch r {
	case scheduler.RolePrefill:
		return pb.PdRole_PD_ROLE_PREFILL
	case scheduler.RoleDecode:
		return pb.PdRole_PD_ROLE_DECODE
	}
	return pb.PdRole_PD_ROLE_UNSPECIFIED
}

// ReportProto is the inverse of ReportOf: id and rep as one report
// message (a snapshot's last report of an instance). The message aliases
// rep's block hash slices.
func ReportProto(id state.Identity, rep *state.Report) *pb.ReportLoadRequest {
	m := &pb.ReportLoadRequest{
		Pool: id.Pool, Deployment: id.Deployment, InstanceId: id.Instance, Address: id.Address,
		Seq: rep.Seq, RunningRequests: rep.RunningRequests, WaitingRequests: rep.WaitingRequests,
		QueuedPrefillTokens: rep.QueuedPrefillTokens, KvCacheUsage: rep.KVCacheUsage, KvCapacityBlocks: rep.KVCapacityBlocks,
		PrefillTokensPerSecond: rep.PrefillTokensPerSecond, BlockSizeTokens: rep.BlockSizeTokens, Draining: rep.Draining,
		ReportsCacheEvents: rep.ReportsCacheEvents, CacheCleared: rep.CacheCleared,
		StoredBlockHashes: rep.Stored, RemovedBlockHashes: rep.Removed, Role: RoleProto(rep.Role),
	}
	if rep.HasQueueMs {
		m.QueueMs = &rep.QueueMs
	}
	return m
}
