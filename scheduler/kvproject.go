package scheduler

import "math"

// KVBlocks is the number of KV blocks of blockSize tokens that uncached
// prompt tokens take: ceil(uncached / blockSize), 0 when blockSize is 0.
// The blocks a pick adds to its instance's KV use until the next report
// (Instance.AssignedKVUsage). Pure; safe for concurrent use.
func KVBlocks(uncached, blockSize uint32) uint64 {
	if blockSize == 0 {
		return 0
	}
	return (uint64(uncached) + uint64(blockSize) - 1) / uint64(blockSize)
}

// AssignedKVUsage is the fraction of an instance's capacity blocks that
// blocks assigned since its last report take: blocks / capacity, 0 when the
// instance reports no capacity (no projection then). Pure; safe for
// concurrent use.
func AssignedKVUsage(blocks, capacity uint64) float64 {
	if capacity == 0 {
		return 0
	}
	return float64(blocks) / float64(capacity)
}

// kvFull reports whether in's projected KV usage, the reported one plus
// what the router assigned since the report, is at or over the policy's
// max_kv_usage (ReasonKVFull).
func kvFull(p *Policy, in *Instance) bool {
	return in.KVUsage+in.AssignedKVUsage >= p.MaxKVUsage
}

// validKV reports whether in's KV figures are finite and >= 0 (one branch,
// as validInstance).
func validKV(in *Instance) bool {
	const inf = 0x7ff0000000000000
	return max(math.Float64bits(in.KVUsage), math.Float64bits(in.AssignedKVUsage)) < inf
}
