package sim

import (
	"math"
	"time"

	"github.com/prefixroute/prefixroute/internal/state"
	"github.com/prefixroute/prefixroute/scheduler"
)

// Instance is one emulated model server: an FCFS prefill queue served in
// batches (a fixed overhead plus the requests' prefill work / throughput,
// the work of u uncached tokens on c cached ones being
// scheduler.PrefillWork(u, c, doubling_context_tokens)), a prefix
// cache of the blocks it actually prefilled, and optional decoding (output
// tokens × decode_per_token, which holds KV but not the prefill engine).
// Not safe for concurrent use: the simulation loop owns it.
type Instance struct {
	ID         string
	Deployment int
	spec       *DeploymentSpec
	bs         int
	cache      *Cache
	fleet      map[uint64]int32 // shared by the fleet: block -> instances holding it
	events     eventLog
	track      bool // record cache events

	queue        []*Request
	head         int
	batch        []*Request
	busy         bool
	batchStart   time.Duration
	batchEnd     time.Duration
	batchTokens  uint64
	batchWork    float64 // the running batch's prefill work, tokens at an empty context
	queuedTokens uint64  // uncached tokens of the queue, estimated at enqueue
	queuedWork   float64 // their prefill work (scheduler.PrefillWork), estimated at enqueue
	queuedPrompt uint64  // prompt tokens of the queue
	queuedPWork  float64 // their work as whole prompts on nothing cached
	doubling     float64 // spec.DoublingContextTokens (0: off)
	promptQueue  bool    // report the queue's prompt tokens (spec.QueueReport "prompt")
	decoding     int
	activeBlocks int
	peakBlocks   int // the most activeBlocks so far

	// Counters over the run.
	Requests, Prefilled, Hit uint64
	Batches                  uint64
	// Busy is the prefill engine's busy time (batches started so far,
	// whole).
	Busy time.Duration
}

func newInstance(id string, dep int, spec *DeploymentSpec, bs int, fleet map[uint64]int32, track bool) *Instance {
	in := &Instance{ID: id, Deployment: dep, spec: spec, bs: bs, cache: NewCache(spec.KVBlocks), fleet: fleet, track: track,
		promptQueue: spec.QueueReport == "prompt"}
	if spec.DoublingContextTokens != nil {
		in.doubling = *spec.DoublingContextTokens
	}
	return in
}

// Cache returns the instance's prefix cache.
func (in *Instance) Cache() *Cache { return in.cache }

// uncached is the prompt tokens left to prefill after matched blocks, as
// the scheduler computes it.
func uncached(prompt uint32, matched, bs int) uint32 {
	c := uint64(matched) * uint64(bs)
	if c >= uint64(prompt) {
		return 0
	}
	return prompt - uint32(c)
}

// enqueue adds r to the queue and reports whether the instance is idle (the
// caller then starts a batch).
func (in *Instance) enqueue(r *Request) bool {
	r.estUncached = uncached(r.PromptTokens, in.cache.Match(r.Hashes), in.bs)
	r.estWork = scheduler.PrefillWork(r.estUncached, r.PromptTokens-r.estUncached, in.doubling)
	in.queuedTokens += uint64(r.estUncached)
	in.queuedWork += r.estWork
	in.queuedPrompt += uint64(r.PromptTokens)
	in.queuedPWork += scheduler.PrefillWork(r.PromptTokens, 0, in.doubling)
	in.queue = append(in.queue, r)
	return !in.busy
}

// prefillTime is the duration of a batch of w tokens of prefill work
// (scheduler.PrefillWork summed over its requests).
func (in *Instance) prefillTime(w float64) time.Duration {
	return in.spec.BatchOverhead.D() + time.Duration(math.Round(w*1e9/in.spec.PrefillTokensPerSecond))
}

// startBatch takes the next batch off the queue at now: requests in FCFS
// order while their uncached tokens fit max_batch_tokens (at least one).
// Each request's cache hit is decided here. It returns the batch's end, or
// false when the instance is busy or the queue empty.
func (in *Instance) startBatch(now time.Duration) (time.Duration, bool) {
	if in.busy || in.head == len(in.queue) {
		return 0, false
	}
	in.batch = in.batch[:0]
	var tokens uint64
	work := 0.0
	for in.head < len(in.queue) {
		r := in.queue[in.head]
		m := in.cache.Match(r.Hashes)
		u := uncached(r.PromptTokens, m, in.bs)
		if len(in.batch) > 0 && tokens+uint64(u) > uint64(in.spec.MaxBatchTokens) {
			break
		}
		in.queue[in.head] = nil
		in.head++
		in.queuedTokens -= uint64(r.estUncached)
		in.queuedWork = max(0, in.queuedWork-r.estWork)
		in.queuedPrompt -= uint64(r.PromptTokens)
		in.queuedPWork = max(0, in.queuedPWork-scheduler.PrefillWork(r.PromptTokens, 0, in.doubling))
		held := m
		for held < len(r.Hashes) && in.fleet[r.Hashes[held]] > 0 {
			held++
		}
		r.Start, r.HitTokens = now, r.PromptTokens-u
		w := scheduler.PrefillWork(u, r.PromptTokens-u, in.doubling)
		r.ownMs = float32(w * 1000 / in.spec.PrefillTokensPerSecond)
		r.Recomputed = uint32(min(uint64(held-m)*uint64(in.bs), uint64(u)))
		tokens += uint64(u)
		work += w
		in.batch = append(in.batch, r)
		in.activeBlocks += len(r.Hashes) + len(r.DecodeHashes)
		in.peakBlocks = max(in.peakBlocks, in.activeBlocks)
	}
	if in.head == len(in.queue) {
		in.queue, in.head = in.queue[:0], 0
	} else if in.head > 1024 && in.head > len(in.queue)/2 {
		in.queue = append(in.queue[:0], in.queue[in.head:]...)
		in.head = 0
	}
	in.busy, in.batchStart, in.batchTokens, in.batchWork = true, now, tokens, work
	in.batchEnd = now + in.prefillTime(work)
	in.Batches++
	in.Busy += in.batchEnd - now
	return in.batchEnd, true
}

// finishBatch completes the running batch at now: its blocks enter the
// cache (the hit ones are touched), deepest first so that a prefix's first
// block is the most recent and eviction takes tails first; its requests get
// their first token. The returned slice is reused
// by the next batch.
func (in *Instance) finishBatch(now time.Duration) []*Request {
	for _, r := range in.batch {
		for k := len(r.Hashes) - 1; k >= 0; k-- {
			in.store(r.Hashes[k])
		}
		r.FirstToken = now
		in.Requests++
		in.Prefilled += uint64(r.PromptTokens - r.HitTokens)
		in.Hit += uint64(r.HitTokens)
		in.decoding++
	}
	in.busy = false
	return in.batch
}

// decodeTime is how long r decodes.
func (in *Instance) decodeTime(r *Request) time.Duration {
	return time.Duration(r.OutputTokens) * in.spec.DecodePerToken.D()
}

// decodeDone ends r's decoding: the blocks its answer completed enter the
// cache and its KV is released.
func (in *Instance) decodeDone(r *Request) {
	for k := len(r.DecodeHashes) - 1; k >= 0; k-- {
		in.store(r.DecodeHashes[k])
	}
	in.decoding--
	in.activeBlocks -= len(r.Hashes) + len(r.DecodeHashes)
}

// store caches h, evicting the least recently used block when full, and
// keeps the fleet index and the event log in step.
func (in *Instance) store(h uint64) {
	inserted, ev, evicted := in.cache.Insert(h)
	if evicted {
		if c := in.fleet[ev]; c <= 1 {
			delete(in.fleet, ev)
		} else {
			in.fleet[ev] = c - 1
		}
		in.events.add(ev, false, in.track)
	}
	if inserted {
		in.fleet[h]++
		in.events.add(h, true, in.track)
	}
}

// queueMs is the instance's own estimate of its queued and running prefill
// work: the running batch's remaining time, then the queue's prefill work
// at the throughput plus one overhead per max_batch_tokens.
func (in *Instance) queueMs(now time.Duration) float64 {
	ms := 0.0
	if in.busy {
		ms = float64(in.batchEnd-now) / 1e6
	}
	return ms + in.waitMs(in.queuedTokens, in.queuedWork)
}

// waitMs is the time the queue's q uncached tokens of w work take to
// prefill: w at the throughput plus one overhead per max_batch_tokens of q
// (0 when nothing waits).
func (in *Instance) waitMs(q uint64, w float64) float64 {
	ms := 0.0
	if in.head < len(in.queue) {
		batches := math.Ceil(float64(max(q, 1)) / float64(in.spec.MaxBatchTokens))
		ms += w*1000/in.spec.PrefillTokensPerSecond + batches*float64(in.spec.BatchOverhead.D())/1e6
	}
	return ms
}

// busyAt is the prefill engine's busy time up to now.
func (in *Instance) busyAt(now time.Duration) time.Duration {
	if in.busy && in.batchEnd > now {
		return in.Busy - (in.batchEnd - now)
	}
	return in.Busy
}

// waiting is the number of queued requests.
func (in *Instance) waiting() int { return len(in.queue) - in.head }

// report fills rep with the instance's load at now and, with cache events,
// the blocks stored and removed since the last report. The queue is the
// running batch's remaining work plus the waiting requests' uncached tokens
// (the instance's match at enqueue), or, with queue_report "prompt", their
// whole prompts: what an engine that decides hits only when it schedules a
// request reports.
func (in *Instance) report(now time.Duration, rep *state.Report) {
	stored, removed := rep.Stored[:0], rep.Removed[:0]
	waiting, work := in.queuedTokens, in.queuedWork
	if in.promptQueue {
		waiting, work = in.queuedPrompt, in.queuedPWork
	}
	queued, running := waiting, 0.0
	if in.busy && in.batchEnd > in.batchStart {
		queued += uint64(float64(in.batchTokens) * float64(in.batchEnd-now) / float64(in.batchEnd-in.batchStart))
		running = float64(in.batchEnd-now) / 1e6
	}
	*rep = state.Report{
		RunningRequests: uint32(len(in.batch)*btoi(in.busy) + in.decoding), WaitingRequests: uint32(in.waiting()),
		QueuedPrefillTokens: queued, QueueMs: running + in.waitMs(waiting, work), HasQueueMs: true,
		KVCacheUsage:           min(1, float64(in.activeBlocks)/float64(in.cache.Capacity())),
		KVCapacityBlocks:       uint64(in.cache.Capacity()),
		PrefillTokensPerSecond: in.spec.PrefillTokensPerSecond, BlockSizeTokens: uint32(in.bs),
		ReportsCacheEvents: in.track,
	}
	if in.spec.NoKVCapacity {
		rep.KVCapacityBlocks = 0
	}
	if in.track {
		rep.Stored, rep.Removed = in.events.drain(stored, removed)
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
