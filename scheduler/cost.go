package scheduler

import "math"

// costModel holds the policy figures the cost of every instance needs,
// computed once per Decide.
type costModel struct {
	promptTokens     uint32
	blocks           int     // Request.Blocks: matched blocks are clamped to it
	blockSize        uint32  // Policy.BlockSizeTokens
	defaultMsPerTok  float64 // 1000 / Policy.DefaultPrefillTokensPerSecond
	defaultTokPerSec float64
	batchWaitMs      float64
	prefillWeight    float64      // Request.PrefillWeight, 1 when 0
	doubling         float64      // Policy.DoublingContextTokens
	decodeRunningMs  float64      // Policy.PDDecodeRunningMs
	deps             []Deployment // set when a deployment's Calibration applies (withDeployments)
}

func newCostModel(p *Policy, req *Request) costModel {
	return costModel{
		promptTokens:     req.PromptTokens,
		blocks:           req.Blocks,
		blockSize:        p.BlockSizeTokens,
		defaultMsPerTok:  1000 / p.DefaultPrefillTokensPerSecond,
		defaultTokPerSec: p.DefaultPrefillTokensPerSecond,
		batchWaitMs:      p.BatchWaitMs,
		prefillWeight:    max(1, req.PrefillWeight),
		doubling:         p.DoublingContextTokens,
		decodeRunningMs:  p.PDDecodeRunningMs,
	}
}

// cost fills the cost parts of r for instance in and returns the number of
// the request's blocks matched on it (MatchedBlocks clamped to
// Request.Blocks):
//
//	uncached    = max(0, PromptTokens - matched*blockSize)
//	cached      = PromptTokens - uncached
//	WorkTokens  = PrefillWork(uncached, cached, C), rounded
//	PrefillMs   = PrefillWork(uncached, cached, C) * 1000/tps   (PrefillMs)
//	QueueMs     = ((HasQueueMs ? in.QueueMs : QueuedPrefillTokens*1000/tps) + AssignedTokens*1000/tps) * QueueScale
//	BatchWaitMs = Policy.BatchWaitMs
//	CostMs      = PrefillWeight*PrefillMs + QueueMs + BatchWaitMs (Request.PrefillWeight, 1 when 0)
//	              + PDDecodeRunningMs*RunningRequests (RoleDecode instances only)
//
// where C is Policy.DoublingContextTokens, tps the instance's prefill
// throughput in tokens per second, and the block size and the throughput
// fall back to the policy's when the instance reports 0 (n*1000/tps is the
// design's n/(tps/1000) with one division per instance instead of three).
// AssignedTokens are work tokens already (the WorkTokens of the picks), so
// the queue the router adds counts the attention term too. Under
// CalibrationApply a deployment with a Calibration has its own C and a
// prefill scale, and QueueScale is its Calibration.QueueScale (1 without
// one; calibration.go). The caller has
// validated in and the policy, so tps > 0; CostMs can still overflow to
// +Inf for an absurdly small throughput, which the caller checks.
func (m *costModel) cost(in *Instance, r *InstanceResult) (matched int) {
	matched = min(in.MatchedBlocks, m.blocks)
	bs := in.BlockSizeTokens
	if bs == 0 {
		bs = m.blockSize
	}
	msPerTok, queue := m.queue(in)
	uncached := uncachedTokens(m.promptTokens, matched, bs)
	doubling, scale := m.prefillModel(in)
	work := PrefillWork(uncached, m.promptTokens-uncached, doubling) * scale
	prefill := work * msPerTok
	// Field by field: a composite literal goes through a stack temporary
	// whose copy stalls on store forwarding.
	r.CostMs = m.prefillWeight*prefill + queue + m.batchWaitMs
	if in.Role == RoleDecode {
		r.CostMs += m.decodeRunningMs * float64(in.RunningRequests)
	}
	r.PrefillMs = prefill
	r.QueueMs = queue
	r.BatchWaitMs = m.batchWaitMs
	r.UncachedTokens = uncached
	r.WorkTokens = uint32(min(work+0.5, math.MaxUint32))
	r.Probability = 0
	r.Joint = 0
	r.Reason = ReasonNone
	return matched
}

// uncachedTokens returns max(0, promptTokens - matched*blockSize) without
// overflow, for matched >= 0.
func uncachedTokens(promptTokens uint32, matched int, blockSize uint32) uint32 {
	if uint64(matched) > math.MaxUint32 {
		return 0 // blockSize >= 1, so matched*blockSize > MaxUint32 >= promptTokens
	}
	// Both factors < 2^32: the product fits in a uint64.
	cached := uint64(matched) * uint64(blockSize)
	if cached >= uint64(promptTokens) {
		return 0
	}
	return promptTokens - uint32(cached)
}

// queue returns instance in's ms per prefill token and its queue_ms, the
// QueueMs of its cost (see cost): what its eligibility and load term depend
// on apart from the request.
func (m *costModel) queue(in *Instance) (msPerTok, queue float64) {
	msPerTok = m.defaultMsPerTok
	if tps := in.PrefillTokensPerSecond; tps != 0 && tps != m.defaultTokPerSec {
		msPerTok = 1000 / tps
	}
	queue = float64(in.AssignedTokens) * msPerTok
	if in.HasQueueMs {
		queue = in.QueueMs + queue
	} else {
		queue = float64(in.QueuedPrefillTokens)*msPerTok + queue
	}
	if m.deps != nil {
		queue *= m.queueScale(in)
	}
	return msPerTok, queue
}
