// Package protoconv converts the API's load report message
// (pb.ReportLoadRequest) to and from internal/state's types. Two callers
// read the same message: the LoadService handler (server), from an
// instance's stream, and the replication (internal/replica), from another
// replica's cluster events and snapshots; both convert it here, so a field
// added to the message is carried the same way by both. Pure functions,
// safe for concurrent use.
package protoconv

import (
	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/internal/state"
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
	}
	return reg.ValidateReport(rep)
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
		StoredBlockHashes: rep.Stored, RemovedBlockHashes: rep.Removed,
	}
	if rep.HasQueueMs {
		m.QueueMs = &rep.QueueMs
	}
	return m
}
