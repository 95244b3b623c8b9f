package state

import (
	"math/bits"
	"slices"
	"unsafe"
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
// of its longest matches. With matched nil it only logs (drops must not be
// nil): the counts of the slots a caller needs are then setCounts's, and a
// large pool's match does not write a count for every slot.
func (x *prefixIndex) matchLogged(hashes []uint64, live []uint64, matched []int32, active, next []uint64, drops *[]matchDrop) {
	clear(matched)
	if drops != nil {
		*drops = (*drops)[:0]
	}
	if len(hashes) == 0 {
		return
	}
	active, next = active[:x.words], next[:x.words]
	r := resolver{x: x, hashes: hashes}
	e := r.find(0)
	if e == nil {
		return
	}
	x.intersect(e, live, active)
	held := 0
	for _, b := range active {
		held += bits.OnesCount64(b)
	}
	k := 1
	for ; k < len(hashes) && held > maxCandidates; k++ {
		e = r.find(k)
		if e == nil {
			setMatched(active, matched, int32(k), drops)
			return
		}
		held = x.narrow(e, active, next, matched, int32(k), drops)
		active, next = next, active
		if held == 0 {
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
		e = r.find(k)
		if e == nil {
			break
		}
		if e.n <= inlineHolders && keepsAll(e, cand[:nc]) {
			continue // the usual case: every candidate holds the block
		}
		kept := 0
		for _, c := range cand[:nc] {
			if x.has(e, c) {
				cand[kept] = c
				kept++
			} else {
				setCount(matched, c, int32(k))
				logDrop(drops, int32(k), c)
			}
		}
		nc = kept
	}
	for _, c := range cand[:nc] {
		setCount(matched, c, int32(k))
		logDrop(drops, int32(k), c)
	}
}

// keepsAll reports whether every slot of cand (increasing) is among the
// inline holders of e (no flag: e.s[:e.n], increasing), in one merge of
// the two lists instead of a has per candidate.
func keepsAll(e *indexEntry, cand []uint32) bool {
	hs := e.s[:e.n]
	if len(cand) > len(hs) {
		return false
	}
	if len(cand) == inlineHolders { // then so many holders: the same three?
		return cand[0] == hs[0] && cand[1] == hs[1] && cand[2] == hs[2]
	}
	h := 0
	for _, c := range cand {
		for h < len(hs) && hs[h] < c {
			h++
		}
		if h == len(hs) || hs[h] != c {
			return false
		}
		h++
	}
	return true
}

// setCount sets matched[c] = k unless matched is nil.
func setCount(matched []int32, c uint32, k int32) {
	if matched != nil {
		matched[c] = k
	}
}

// setCounts writes into matched the count drops gives each slot set in
// mask (a bitset over slots), 0 for those it does not name; other slots
// are left alone. It is matchLogged's counts for those slots, from its log.
func setCounts(drops []matchDrop, mask []uint64, matched []int32) {
	for w, b := range mask {
		setMatchedWord(w, b, matched, 0)
	}
	for _, d := range drops {
		if int(d.w) < len(mask) {
			setMatchedWord(int(d.w), d.bits&mask[d.w], matched, d.k)
		}
	}
}

// narrow sets next = active ∩ holders of e, gives the slots it drops the
// count k (in matched unless nil, logged in *drops unless nil) and returns
// how many slots remain: for a bitset one pass over the words.
func (x *prefixIndex) narrow(e *indexEntry, active, next []uint64, matched []int32, k int32, drops *[]matchDrop) int {
	held := 0
	if e.n&bitsetFlag != 0 {
		d := *x.bitsets.at(e.s[0])
		next = next[:len(active)]
		for w, a := range active {
			var b uint64
			if w < len(d) {
				b = a & d[w]
			}
			next[w] = b
			held += bits.OnesCount64(b)
			if dropped := a &^ b; dropped != 0 {
				dropWord(w, dropped, matched, k, drops)
			}
		}
		return held
	}
	x.intersect(e, active, next)
	for w, a := range active {
		held += bits.OnesCount64(next[w])
		if dropped := a &^ next[w]; dropped != 0 {
			dropWord(w, dropped, matched, k, drops)
		}
	}
	return held
}

// dropWord gives the slots set in word w of a bitset the count k, in
// matched unless nil, logged in *drops unless nil.
func dropWord(w int, dropped uint64, matched []int32, k int32, drops *[]matchDrop) {
	if matched != nil {
		setMatchedWord(w, dropped, matched, k)
	}
	if drops != nil {
		*drops = append(*drops, matchDrop{k, int32(w), dropped})
	}
}

// logDrop appends slot c's count k to *drops when drops is not nil.
func logDrop(drops *[]matchDrop, k int32, c uint32) {
	if drops != nil {
		*drops = append(*drops, matchDrop{k, int32(c / 64), 1 << (c % 64)})
	}
}

// peekAhead is how many blocks match locates together, and how far ahead
// of the block it is at: the home slots of a batch are prefetched while the
// previous batch is worked on, so that the cache misses of a long prefix
// overlap instead of coming one after another (the prefetch is a hint, so
// the misses do not hold up the work between). A prefix that stops matching
// early has located at most 2·peekAhead−1 blocks it did not need.
// prefetch_*.s take exactly peekAhead addresses.
const peekAhead = 8

// resolver finds the entries of a request's blocks for match: fill mixes
// each block's hash, finds its table and home slot and prefetches the slot,
// a batch ahead of the block asked for, keeping where each is, so that find
// probes from there without mixing the hash again. It reads the index
// only, so concurrent matches under the read lock may each have one.
type resolver struct {
	x      *prefixIndex
	hashes []uint64
	hi     int                // blocks [0, hi) are located, block k at ring position k % ring
	slots  [ring][]indexEntry // the slots of the block's table (not the table: one load less in find)
	home   [ring]uint64       // home slot index in slots
}

const ring = 2 * peekAhead

// fill locates the home slots of blocks [r.hi, end) and prefetches them,
// peekAhead at a time: the cache line where each home slot starts and the
// one where the slot after it ends, so that a 24-byte slot across two
// lines, or a block one probe past its home, does not miss either (a
// quarter of the slots straddle a line).
func (r *resolver) fill(end int) {
	x := r.x
	dir, depth, seed := x.dir, x.depth, x.seed
	for r.hi < end {
		var addrs, ends [peekAhead]uintptr
		n := min(end-r.hi, peekAhead)
		for q := range n {
			k := r.hi + q
			m := mix(r.hashes[k], seed)
			sl := dir[m>>(64-depth)].slots // a shift by 64 (depth 0) is 0 in Go
			i := m & uint64(len(sl)-1)
			r.slots[uint(k)%ring], r.home[uint(k)%ring] = sl, i
			addrs[q] = uintptr(unsafe.Pointer(&sl[i]))
			ends[q] = addrs[q] + 2*unsafe.Sizeof(sl[0]) - 1 // may be past sl: a prefetch faults on no address
		}
		for q := n; q < peekAhead; q++ {
			addrs[q], ends[q] = addrs[0], ends[0]
		}
		prefetch(&addrs)
		prefetch(&ends)
		r.hi += n
	}
}

// find returns the entry of block k, nil when no instance holds it, as
// x.find(r.hashes[k]) does. Blocks are asked for in increasing order,
// none skipped.
func (r *resolver) find(k int) *indexEntry {
	if k+peekAhead >= r.hi && r.hi < len(r.hashes) {
		r.fill(min(len(r.hashes), k+ring))
	}
	j := uint(k) % ring
	h, sl, i := r.hashes[k], r.slots[j], r.home[j]
	mask := uint64(len(sl) - 1)
	for ; ; i = (i + 1) & mask {
		e := &sl[i]
		if e.n == 0 {
			return nil
		}
		if e.hash == h {
			return e
		}
	}
}

// maxCandidates is the number of matching slots at or below which match
// checks slots one by one instead of intersecting bitsets.
const maxCandidates = 8

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

// setMatched sets matched[slot] = k for every slot in set (unless matched
// is nil), logging each non-empty word in *drops when drops is not nil.
func setMatched(set []uint64, matched []int32, k int32, drops *[]matchDrop) {
	for w, b := range set {
		if matched != nil {
			setMatchedWord(w, b, matched, k)
		}
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
