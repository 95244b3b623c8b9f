package state

import (
	"math/bits"
	"slices"
)

// match writes into matched[slot] the number of leading hashes held by each
// slot set in live, for every slot (0 for slots holding none). active and
// next are scratch bitsets of at least x.words words.
//
// While many slots are still matching, the holder sets are intersected a
// bitset word at a time; once at most maxCandidates remain (after the
// shared head of a prompt, typically), each later block only checks those
// slots against its entry.
func (x *prefixIndex) match(hashes []uint64, live []uint64, matched []int32, active, next []uint64) {
	x.matchLogged(hashes, live, matched, active, next, nil)
}

// matchDrop says that the slots set in bits of bitset word w hold exactly k
// leading hashes.
type matchDrop struct {
	k    int32
	w    int32
	bits uint64
}

// matchLogged is match that also appends to *drops (when not nil) every
// group of slots it gives a non-zero count, in increasing order of the
// count: walked from the end, the first slot of each deployment met is one
// of its longest matches.
func (x *prefixIndex) matchLogged(hashes []uint64, live []uint64, matched []int32, active, next []uint64, drops *[]matchDrop) {
	clear(matched)
	if drops != nil {
		*drops = (*drops)[:0]
	}
	if len(hashes) == 0 {
		return
	}
	active, next = active[:x.words], next[:x.words]
	e := x.find(hashes[0])
	if e == nil {
		return
	}
	x.intersect(e, live, active)
	k := 1
	for ; k < len(hashes); k++ {
		if few(active) {
			break
		}
		if k%peekAhead == 1 {
			x.peekBatch(hashes[k:], next)
		}
		e = x.find(hashes[k])
		if e == nil {
			setMatched(active, matched, int32(k), drops)
			return
		}
		x.intersect(e, active, next)
		alive := false
		for w := range active {
			if dropped := active[w] &^ next[w]; dropped != 0 {
				setMatchedWord(w, dropped, matched, int32(k))
				if drops != nil {
					*drops = append(*drops, matchDrop{int32(k), int32(w), dropped})
				}
			}
			alive = alive || next[w] != 0
		}
		active, next = next, active
		if !alive {
			return
		}
	}
	if k == len(hashes) {
		setMatched(active, matched, int32(len(hashes)), drops)
		return
	}
	// Few candidates left: follow them one by one.
	var cand [maxCandidates]uint32
	nc := 0
	for w, b := range active {
		for ; b != 0; b &= b - 1 {
			cand[nc] = uint32(w*64 + bits.TrailingZeros64(b))
			nc++
		}
	}
	for ; k < len(hashes) && nc > 0; k++ {
		if k%peekAhead == 1 {
			x.peekBatch(hashes[k:], next)
		}
		e = x.find(hashes[k])
		if e == nil {
			break
		}
		kept := 0
		for _, c := range cand[:nc] {
			if x.has(e, c) {
				cand[kept] = c
				kept++
			} else {
				matched[c] = int32(k)
				logDrop(drops, int32(k), c)
			}
		}
		nc = kept
	}
	for _, c := range cand[:nc] {
		matched[c] = int32(k)
		logDrop(drops, int32(k), c)
	}
}

// logDrop appends slot c's count k to *drops when drops is not nil.
func logDrop(drops *[]matchDrop, k int32, c uint32) {
	if drops != nil {
		*drops = append(*drops, matchDrop{k, int32(c / 64), 1 << (c % 64)})
	}
}

// peekAhead is how many blocks match looks up ahead of the one it is at:
// their home slots are loaded together, so that the cache misses of a long
// prefix overlap instead of coming one after another. A prefix that stops
// matching early pays for at most peekAhead-1 loads it did not need.
const peekAhead = 8

// peekBatch loads the home slots of the first peekAhead hashes (or fewer)
// and stores what it read in scratch[0], scratch of the caller's that is
// overwritten before it is read.
func (x *prefixIndex) peekBatch(hashes []uint64, scratch []uint64) {
	var sum uint64
	for _, h := range hashes[:min(len(hashes), peekAhead)] {
		sum += x.peek(h)
	}
	scratch[0] = sum
}

// maxCandidates is the number of matching slots below which match checks
// slots one by one instead of intersecting bitsets.
const maxCandidates = 8

// few reports whether at most maxCandidates bits are set in set.
func few(set []uint64) bool {
	n := 0
	for _, b := range set {
		n += bits.OnesCount64(b)
		if n > maxCandidates {
			return false
		}
	}
	return true
}

// has reports whether slot holds e's block.
func (x *prefixIndex) has(e *indexEntry, slot uint32) bool {
	switch {
	case e.n&wordFlag != 0:
		return slot < 64 && inlineWord(e)&(1<<slot) != 0
	case e.n&bitsetFlag != 0:
		d := *x.bitsets.at(e.s[0])
		w := int(slot / 64)
		return w < len(d) && d[w]&(1<<(slot%64)) != 0
	case e.n&listFlag != 0:
		_, found := slices.BinarySearch(*x.lists.at(e.s[0]), slot)
		return found
	}
	for _, s := range e.s[:e.n] {
		if s == slot {
			return true
		}
	}
	return false
}

// intersect sets out = set ∩ holders of e.
func (x *prefixIndex) intersect(e *indexEntry, set, out []uint64) {
	var ids []uint32
	switch {
	case e.n&wordFlag != 0:
		clear(out)
		out[0] = set[0] & inlineWord(e)
		return
	case e.n&bitsetFlag != 0:
		d := *x.bitsets.at(e.s[0])
		for w := range out {
			if w < len(d) {
				out[w] = set[w] & d[w]
			} else {
				out[w] = 0
			}
		}
		return
	case e.n&listFlag != 0:
		ids = *x.lists.at(e.s[0])
	default:
		ids = e.s[:e.n]
	}
	clear(out)
	for _, s := range ids {
		w := int(s / 64)
		if w < len(set) && set[w]&(1<<(s%64)) != 0 {
			out[w] |= 1 << (s % 64)
		}
	}
}

// inlineWord returns the inline one-word bitset of e (wordFlag).
func inlineWord(e *indexEntry) uint64 { return uint64(e.s[0]) | uint64(e.s[1])<<32 }

// setMatched sets matched[slot] = k for every slot in set, logging each
// non-empty word in *drops when drops is not nil.
func setMatched(set []uint64, matched []int32, k int32, drops *[]matchDrop) {
	for w, b := range set {
		setMatchedWord(w, b, matched, k)
		if drops != nil && b != 0 {
			*drops = append(*drops, matchDrop{k, int32(w), b})
		}
	}
}

// setMatchedWord sets matched[slot] = k for every slot set in word w.
func setMatchedWord(w int, b uint64, matched []int32, k int32) {
	for ; b != 0; b &= b - 1 {
		matched[w*64+bits.TrailingZeros64(b)] = k
	}
}
