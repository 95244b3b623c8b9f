// Package kvalign translates an engine's KV-cache events into the router's
// block hashes, so that a gateway hashing a prompt with pkg/prefixhash gets
// exactly the blocks an instance reported.
//
// vLLM's and SGLang's own block hashes (sha256 of pickles, or Python
// hash()) cannot be reproduced by a gateway. An Aligner therefore
// recomputes the router's chained hash of every stored block from the
// event's token_ids: block 0 of a chain without parent is hashed from the
// pool seed (prefixhash.Seed(pool, salt)), and any other from the router
// hash of its parent, found through a map from engine hash to router hash.
// BlockRemoved is translated through the same map.
//
// # The map and its bounds
//
// The map holds one entry per block the engine holds (MaxHeld at most:
// more means the view no longer matches the engine, ErrOverCapacity), plus
// the last MaxHeld/4 (at least 1024) removed blocks, kept only to resolve
// the parent of a child stored after its parent was evicted (vLLM stores a
// request's new blocks with the parent it computed, which may have been
// evicted meanwhile). A parent found in neither is a translation miss: the
// event's blocks are not reported, never reported wrongly.
//
// Several engine blocks may share a router hash (the same tokens under
// different engine-side keys); the router hash is reported stored with the
// first and removed with the last.
//
// # What is not reported
//
// Blocks whose engine hash covers more than the tokens (extra_keys: images,
// cache_salt) and every block after them in the event; LoRA adapter blocks
// (lora_id or lora_name set: a different prefix space, see docs/engines.md);
// blocks on another medium than GPU (CPU offload tiers); and KV-cache
// groups other than 0 of hybrid models. Each is counted in Stats.
//
// An Aligner is not safe for concurrent use.
package kvalign

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/prefixroute/prefixroute/internal/kvevents"
	"github.com/prefixroute/prefixroute/pkg/prefixhash"
)

// ErrBlockSize is wrapped by the error of an event whose block size is not
// the pool's.
var ErrBlockSize = errors.New("block size mismatch")

// ErrOverCapacity is returned when the engine holds more blocks than
// MaxHeld: the agent's view is then not trustworthy.
var ErrOverCapacity = errors.New("more blocks held than the aligner's bound")

// Delta is what one event changes in the router's view.
type Delta struct {
	// Cleared drops every block before Stored applies.
	Cleared         bool
	Stored, Removed []uint64
}

// Reset empties d, keeping its buffers.
func (d *Delta) Reset() { d.Cleared, d.Stored, d.Removed = false, d.Stored[:0], d.Removed[:0] }

// Stats counts what an Aligner did not translate.
type Stats struct {
	// Misses counts stored events whose parent was unknown, removed blocks
	// that were not held, and stored events whose token count was not
	// blocks × block size.
	Misses uint64
	// LoRA, OtherMedium, ExtraKeys and OtherGroup count blocks skipped for
	// those reasons.
	LoRA, OtherMedium, ExtraKeys, OtherGroup uint64
}

// Aligner is one instance's engine-hash → router-hash map.
type Aligner struct {
	seed      uint64
	blockSize int
	maxHeld   int

	held map[uint64]uint64 // engine hash → router hash, held blocks
	refs map[uint64]uint32 // router hash → held engine blocks
	// gone is a FIFO of removed mappings, for parents only.
	gone     map[uint64]uint64
	goneRing []uint64
	goneNext int

	scratch []uint64
	stats   Stats
}

// New returns an Aligner for a pool seed (prefixhash.Seed(pool, salt)),
// the pool's block size in tokens (> 0) and the most blocks the engine may
// hold (> 0; its KV capacity in blocks, with room for other groups).
func New(seed uint64, blockSize, maxHeld int) *Aligner {
	blockSize, maxHeld = max(blockSize, 1), max(maxHeld, 1)
	return &Aligner{seed: seed, blockSize: blockSize, maxHeld: maxHeld,
		held: make(map[uint64]uint64), refs: make(map[uint64]uint32),
		gone: make(map[uint64]uint64), goneRing: make([]uint64, 0, max(maxHeld/4, 1024))}
}

// BlockSize is the pool's block size the Aligner hashes with.
func (a *Aligner) BlockSize() int { return a.blockSize }

// Len is the number of distinct router hashes held.
func (a *Aligner) Len() int { return len(a.refs) }

// Stats returns the counts so far.
func (a *Aligner) Stats() Stats { return a.stats }

// Snapshot appends every held router hash to dst, in no order.
func (a *Aligner) Snapshot(dst []uint64) []uint64 {
	return slices.AppendSeq(dst, maps.Keys(a.refs))
}

// Reset forgets everything (the view became unknown).
func (a *Aligner) Reset() {
	clear(a.held)
	clear(a.refs)
	clear(a.gone)
	a.goneRing, a.goneNext = a.goneRing[:0], 0
}

// Apply translates one event into d (appending to it). An error wrapping
// ErrBlockSize (naming both sizes) or ErrOverCapacity means the view can no
// longer be trusted; d is then unchanged by the event.
func (a *Aligner) Apply(ev *kvevents.Event, d *Delta) error {
	switch ev.Kind {
	case kvevents.KindCleared:
		a.Reset()
		d.Cleared, d.Stored, d.Removed = true, d.Stored[:0], d.Removed[:0]
	case kvevents.KindStored:
		return a.stored(ev, d)
	case kvevents.KindRemoved:
		if !a.mine(ev) {
			return nil
		}
		for _, e := range ev.BlockHashes {
			r, ok := a.held[e]
			if !ok {
				a.stats.Misses++
				continue
			}
			delete(a.held, e)
			a.remember(e, r)
			if a.refs[r]--; a.refs[r] == 0 {
				delete(a.refs, r)
				d.Removed = append(d.Removed, r)
			}
		}
	}
	return nil
}

// mine reports whether an event's blocks are the GPU blocks of group 0,
// counting those that are not.
func (a *Aligner) mine(ev *kvevents.Event) bool {
	n := uint64(len(ev.BlockHashes))
	switch {
	case ev.Medium != "" && ev.Medium != "GPU":
		a.stats.OtherMedium += n
	case ev.Group != 0:
		a.stats.OtherGroup += n
	case ev.LoRA:
		a.stats.LoRA += n
	default:
		return true
	}
	return false
}

func (a *Aligner) stored(ev *kvevents.Event, d *Delta) error {
	if ev.BlockSize != a.blockSize {
		return fmt.Errorf("%w: the engine's BlockStored has block_size %d tokens, the pool's block size is %d tokens (--block-size)",
			ErrBlockSize, ev.BlockSize, a.blockSize)
	}
	if !a.mine(ev) {
		return nil
	}
	n := len(ev.BlockHashes)
	if n == 0 || len(ev.TokenIDs) != n*a.blockSize {
		a.stats.Misses++
		return nil
	}
	seed := a.seed
	if ev.HasParent {
		r, ok := a.held[ev.Parent]
		if !ok {
			r, ok = a.gone[ev.Parent]
		}
		if !ok {
			a.stats.Misses++
			return nil
		}
		seed = r
	}
	if ev.ExtraKeys != nil {
		for i, set := range ev.ExtraKeys {
			if set && i < n {
				a.stats.ExtraKeys += uint64(n - i)
				n = i
				break
			}
		}
	}
	if n == 0 {
		return nil
	}
	fresh := 0
	for _, e := range ev.BlockHashes[:n] {
		if _, ok := a.held[e]; !ok {
			fresh++
		}
	}
	if len(a.held)+fresh > a.maxHeld {
		return fmt.Errorf("%w: %d blocks held, %d more stored, bound %d", ErrOverCapacity, len(a.held), fresh, a.maxHeld)
	}
	a.scratch = prefixhash.Tokens(a.scratch[:0], seed, a.blockSize, ev.TokenIDs[:n*a.blockSize])
	for i, e := range ev.BlockHashes[:n] {
		r := a.scratch[i]
		if old, ok := a.held[e]; ok {
			if old == r {
				continue // stored again: nothing changes
			}
			// The engine reused a hash for other tokens: move it.
			if a.refs[old]--; a.refs[old] == 0 {
				delete(a.refs, old)
				d.Removed = append(d.Removed, old)
			}
		}
		a.held[e] = r
		if a.refs[r]++; a.refs[r] == 1 {
			d.Stored = append(d.Stored, r)
		}
	}
	return nil
}

// remember keeps a removed mapping for parent lookups, evicting the oldest.
func (a *Aligner) remember(e, r uint64) {
	if _, ok := a.gone[e]; ok {
		a.gone[e] = r // already in the ring
		return
	}
	if len(a.goneRing) < cap(a.goneRing) {
		a.goneRing = append(a.goneRing, e)
	} else {
		old := a.goneRing[a.goneNext]
		delete(a.gone, old)
		a.goneRing[a.goneNext] = e
		a.goneNext = (a.goneNext + 1) % len(a.goneRing)
	}
	a.gone[e] = r
}
