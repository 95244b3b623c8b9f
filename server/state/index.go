package state

import (
	"math/bits"
	"slices"
)

// prefixIndex maps a block hash to the instances (by slot) holding it. Because
// block hashes are chained, a block's hash names its whole prefix, so the
// longest cached prefix of a request on an instance is the first position at
// which the instance stops holding the request's hashes. Holders of a block
// are a sorted slot list while few, and a bitset over the pool's slots once
// the list would be larger than the bitset, so the hot prefixes every
// instance holds are intersected a word (64 instances) at a time. Not safe
// for concurrent use: the owning Pool's lock guards it.
type prefixIndex struct {
	entries map[uint64]*holders
	words   int // bitset words covering every slot in use
	pairs   int // (block, slot) pairs held
}

// holders is the set of slots holding one block.
type holders struct {
	ids   []uint32 // sorted; used while dense == nil
	dense []uint64 // bit s set = slot s holds the block
	n     int
}

func newPrefixIndex() prefixIndex {
	return prefixIndex{entries: make(map[uint64]*holders), words: 1}
}

// grow makes the bitsets cover slot.
func (x *prefixIndex) grow(slot uint32) {
	if w := int(slot)/64 + 1; w > x.words {
		x.words = w
	}
}

func (x *prefixIndex) add(hash uint64, slot uint32) {
	h := x.entries[hash]
	if h == nil {
		h = &holders{}
		x.entries[hash] = h
	}
	if h.dense != nil {
		w := int(slot / 64)
		if w >= len(h.dense) {
			h.dense = append(h.dense, make([]uint64, w+1-len(h.dense))...)
		}
		bit := uint64(1) << (slot % 64)
		if h.dense[w]&bit != 0 {
			return
		}
		h.dense[w] |= bit
		h.n++
		x.pairs++
		return
	}
	i, found := slices.BinarySearch(h.ids, slot)
	if found {
		return
	}
	h.ids = slices.Insert(h.ids, i, slot)
	h.n++
	x.pairs++
	if len(h.ids) > 2*x.words {
		h.dense = make([]uint64, x.words)
		for _, s := range h.ids {
			h.dense[s/64] |= 1 << (s % 64)
		}
		h.ids = nil
	}
}

func (x *prefixIndex) remove(hash uint64, slot uint32) {
	h := x.entries[hash]
	if h == nil {
		return
	}
	if h.dense != nil {
		w := int(slot / 64)
		bit := uint64(1) << (slot % 64)
		if w >= len(h.dense) || h.dense[w]&bit == 0 {
			return
		}
		h.dense[w] &^= bit
		h.n--
		x.pairs--
	} else {
		i, found := slices.BinarySearch(h.ids, slot)
		if !found {
			return
		}
		h.ids = slices.Delete(h.ids, i, i+1)
		h.n--
		x.pairs--
	}
	if h.n == 0 {
		delete(x.entries, hash)
	}
}

// match writes into matched[slot] the number of leading hashes held by each
// slot set in live, for every slot (0 for slots holding none). active and
// next are scratch bitsets of at least x.words words.
func (x *prefixIndex) match(hashes []uint64, live []uint64, matched []int32, active, next []uint64) {
	clear(matched)
	if len(hashes) == 0 {
		return
	}
	active, next = active[:x.words], next[:x.words]
	h := x.entries[hashes[0]]
	if h == nil {
		return
	}
	h.intersect(live, active)
	for k := 1; k < len(hashes); k++ {
		h = x.entries[hashes[k]]
		if h == nil {
			setMatched(active, matched, int32(k))
			return
		}
		h.intersect(active, next)
		alive := false
		for w := range active {
			if dropped := active[w] &^ next[w]; dropped != 0 {
				setMatchedWord(w, dropped, matched, int32(k))
			}
			alive = alive || next[w] != 0
		}
		active, next = next, active
		if !alive {
			return
		}
	}
	setMatched(active, matched, int32(len(hashes)))
}

// intersect sets out = set ∩ h.
func (h *holders) intersect(set, out []uint64) {
	if h.dense != nil {
		for w := range out {
			if w < len(h.dense) {
				out[w] = set[w] & h.dense[w]
			} else {
				out[w] = 0
			}
		}
		return
	}
	clear(out)
	for _, s := range h.ids {
		w := int(s / 64)
		if w < len(set) && set[w]&(1<<(s%64)) != 0 {
			out[w] |= 1 << (s % 64)
		}
	}
}

// setMatched sets matched[slot] = k for every slot in set.
func setMatched(set []uint64, matched []int32, k int32) {
	for w, b := range set {
		setMatchedWord(w, b, matched, k)
	}
}

// setMatchedWord sets matched[slot] = k for every slot set in word w.
func setMatchedWord(w int, b uint64, matched []int32, k int32) {
	for ; b != 0; b &= b - 1 {
		matched[w*64+bits.TrailingZeros64(b)] = k
	}
}
