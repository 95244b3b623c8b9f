// Package pickbook keeps the router's recent picks that carried a
// request_id, with what each decision predicted for its chosen instance, so
// that a gateway's outcome (PickService.ReportOutcome) is matched with the
// pick it belongs to and the prediction compared with the observed time to
// first token. The server feeds it on Pick and reads it on ReportOutcome.
//
// Memory is bounded: Size entries in Shards shards, each a ring with a map
// from request_id to its slot; the oldest pick of a shard is evicted by the
// next. An entry holds the request's strings (no copy) and about 120 bytes
// more: about 8 MiB for the whole book at 65536 entries, allocated as picks
// with a request_id arrive (a router whose gateways send none holds none).
// An outcome whose pick was evicted or never made is still counted by the
// caller, not matched.
package pickbook

import (
	"hash/maphash"
	"sync"
	"time"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
)

// The book's bounds.
const (
	Size      = 1 << 16       // picks kept, at most
	Shards    = 16            // shards, each with its own lock
	ShardSize = Size / Shards // picks kept per shard
)

// Entry is one recent pick and what a gateway reported about it: the
// decision's prediction for the chosen instance and, once an outcome
// matched, the observed status and ttft. It is a plain value.
type Entry struct {
	Pool, RequestID string
	// Instance and Deployment are the pick's choice.
	Instance, Deployment string
	// At is when the pick was made.
	At time.Time
	// CostMs, PrefillMs and QueueMs are the decision's figures for the chosen
	// instance, in ms.
	CostMs, PrefillMs, QueueMs float64
	// The features of the prediction, for the calibration (internal/calib):
	// new and cached prompt tokens on the chosen instance, the throughput
	// (tokens/s) and batch wait (ms) used, the predicted TTFT (ms), the
	// policy's doubling context (tokens) and the calibration version
	// the costs used; RawQueueMs is QueueMs before the calibration's queue
	// correction (scheduler.Calibration.QueueScale), what the fit learns
	// from; QueueSeen is false when the router could not see the queue the
	// request met (a saturated pick, or a report older than
	// internal/calib.MaxQueueSeenAgeMs).
	Uncached, Cached                                 uint32
	TPS, BatchWaitMs, PredictedTTFTMs, PriorDoubling float64
	RawQueueMs                                       float64
	CalibrationVersion                               uint64
	QueueSeen                                        bool
	// TTFTTargetMs is the pick's target (0: none); SLOMet whether the pick
	// met it by prediction.
	TTFTTargetMs float64
	SLOMet       bool
	// Reported is true once an outcome matched the pick; Tried, Status and
	// TTFTMs are then the latest one's (Tried differs from Instance when the
	// gateway fell back to another instance). HasTTFT says TTFTMs was given.
	Reported bool
	Tried    string
	Status   pb.OutcomeStatus
	TTFTMs   float64
	HasTTFT  bool
}

// Book is the bounded book of recent picks by request_id. Safe for
// concurrent use: one shard lock per add or match, no allocation once a
// shard's ring is full (entries are then replaced in place).
type Book struct {
	seed   maphash.Seed
	shards [Shards]bookShard
}

type bookShard struct {
	mu   sync.Mutex
	ring []Entry
	next int
	byID map[string]int32 // request_id → ring slot
}

// New returns an empty book.
func New() *Book {
	b := &Book{seed: maphash.MakeSeed()}
	for i := range b.shards {
		b.shards[i].byID = make(map[string]int32)
	}
	return b
}

func (b *Book) shard(requestID string) *bookShard {
	return &b.shards[maphash.String(b.seed, requestID)%Shards]
}

// Add records a pick. A pick with an id already in the book replaces it
// (the gateway retried with the same id: the latest pick is the one tried).
func (b *Book) Add(e *Entry) {
	sh := b.shard(e.RequestID)
	sh.mu.Lock()
	if i, ok := sh.byID[e.RequestID]; ok {
		sh.ring[i] = *e
		sh.mu.Unlock()
		return
	}
	if len(sh.ring) < ShardSize { // the ring grows until full, then turns
		sh.byID[e.RequestID] = int32(len(sh.ring))
		sh.ring = append(sh.ring, *e)
		sh.mu.Unlock()
		return
	}
	slot := &sh.ring[sh.next]
	if slot.RequestID != "" {
		delete(sh.byID, slot.RequestID)
	}
	*slot = *e
	sh.byID[e.RequestID] = int32(sh.next)
	sh.next = (sh.next + 1) % len(sh.ring)
	sh.mu.Unlock()
}

// Match attaches an outcome to the pick of requestID in pool and copies
// the updated entry to out; false when the book has no such pick.
func (b *Book) Match(pool, requestID, tried string, st pb.OutcomeStatus, ttft *float64, out *Entry) bool {
	if requestID == "" {
		return false
	}
	sh := b.shard(requestID)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	i, ok := sh.byID[requestID]
	if !ok || sh.ring[i].Pool != pool {
		return false
	}
	e := &sh.ring[i]
	e.Reported, e.Tried, e.Status = true, tried, st
	e.TTFTMs, e.HasTTFT = 0, ttft != nil
	if ttft != nil {
		e.TTFTMs = *ttft
	}
	*out = *e
	return true
}

// Get returns a copy of the pick of requestID.
func (b *Book) Get(requestID string) (Entry, bool) {
	sh := b.shard(requestID)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	i, ok := sh.byID[requestID]
	if !ok {
		return Entry{}, false
	}
	return sh.ring[i], true
}
