package state

import (
	"math/bits"
	"math/rand/v2"
	"slices"
)

// prefixIndex maps a block hash to the instances (by slot) holding it. Because
// block hashes are chained, a block's hash names its whole prefix, so the
// longest cached prefix of a request on an instance is the first position at
// which the instance stops holding the request's hashes.
//
// Blocks live in open-addressing tables of 24-byte entries (linear probing,
// at most 3/4 full, deletion by backward shift, so no tombstones), found
// through a directory on the top bits of the mixed hash: a table that
// reaches maxTableSlots splits in two instead of doubling, so no insertion
// rehashes more than one bounded table under the pool's write lock. The
// tables hold no pointers, so the garbage collector does not scan them.
//
// Holders of a block are kept in its entry while there are at most
// inlineHolders of them (most blocks: no allocation, no pointer to follow);
// past that in a sorted slot list while few, and in a bitset over the pool's
// slots once the list would be larger than the bitset, so the hot prefixes
// every instance holds are intersected a word (64 instances) at a time.
// Lists and bitsets of blocks no longer held are kept for reuse, so steady
// churn allocates nothing. Not safe for concurrent use: the owning Pool's
// lock guards it.
type prefixIndex struct {
	dir       []*indexTable // by the top depth bits of mix(hash)
	depth     uint8         // global depth: len(dir) == 1<<depth
	seed      uint64
	count     int             // blocks held
	lists     arena[[]uint32] // sorted slot lists of blocks with listFlag
	bitsets   arena[[]uint64] // bitsets of blocks with bitsetFlag (bit s: slot s)
	freeLists []uint32        // indexes of unused lists and bitsets
	freeSets  []uint32
	words     int    // bitset words covering every slot in use
	pairs     int    // (block, slot) pairs held
	sink      uint64 // see touch
}

// indexTable is one open-addressing table of the directory.
type indexTable struct {
	slots []indexEntry // len is a power of two
	count int
	depth uint8 // local depth: every hash here has the same top depth bits
}

// indexEntry is one block. n == 0 marks an empty table slot (a held block
// has at least one holder). The low bits of n count the holders: with no
// flag they are the sorted slots s[:n]; with listFlag s[0] indexes their
// sorted list in lists, with bitsetFlag their bitset in bitsets (which may
// be shorter than words: missing words hold no one), with wordFlag their
// bitset is one word, inline (pools of up to 64 slots need no more).
type indexEntry struct {
	hash uint64
	n    uint32 // flags | number of holders
	s    [inlineHolders]uint32
}

const (
	inlineHolders = 3
	listFlag      = 1 << 31
	bitsetFlag    = 1 << 30
	wordFlag      = 1 << 29 // a one-word bitset inline: s[0] low, s[1] high half
	countMask     = wordFlag - 1
	minTableSlots = 8
	maxTableSlots = 1 << 12 // 96 KiB: the most one insertion rehashes
	maxDepth      = 20      // directory of at most 1M tables; past that tables just grow
)

func newPrefixIndex() prefixIndex {
	return prefixIndex{
		dir:   []*indexTable{{slots: make([]indexEntry, minTableSlots)}},
		seed:  rand.Uint64(),
		words: 1,
	}
}

// mix spreads a block hash over 64 bits with the index's random seed, so
// that clients choosing hashes cannot aim them at one probe sequence.
func mix(h, seed uint64) uint64 {
	hi, lo := bits.Mul64(h^seed, 0x9e3779b97f4a7c15)
	return hi ^ lo
}

// grow makes the bitsets cover slot.
func (x *prefixIndex) grow(slot uint32) {
	if w := int(slot)/64 + 1; w > x.words {
		x.words = w
	}
}

// table returns the table for mixed hash m.
func (x *prefixIndex) table(m uint64) *indexTable {
	// A shift by 64 (depth 0) is 0 in Go.
	return x.dir[m>>(64-x.depth)]
}

// find returns hash's entry, nil when no instance holds it. The pointer is
// valid until the index is next modified.
func (x *prefixIndex) find(hash uint64) *indexEntry {
	m := mix(hash, x.seed)
	t := x.table(m)
	mask := uint64(len(t.slots) - 1)
	for i := m & mask; ; i = (i + 1) & mask {
		e := &t.slots[i]
		if e.n == 0 {
			return nil
		}
		if e.hash == hash {
			return e
		}
	}
}

// touch loads the home slot of hash, so that the cache misses of a batch of
// updates overlap instead of coming one after another (a touch loads and
// branches on nothing; the updates' probe loops branch on what they load).
// The sum is stored only so that the loads are not optimized away.
func (x *prefixIndex) touch(hash uint64) {
	m := mix(hash, x.seed)
	t := x.table(m)
	mask := uint64(len(t.slots) - 1)
	// The home slot and two further (24-byte slots: the next cache line),
	// which a probe or a backward shift usually reads too.
	x.sink += t.slots[m&mask].hash + uint64(t.slots[(m+2)&mask].n)
}

// insert returns hash's entry, adding an empty one (n == 0, hash set) when
// absent; the caller must then give it a holder. The pointer is valid until
// the index is next modified.
func (x *prefixIndex) insert(hash uint64) (e *indexEntry, found bool) {
	m := mix(hash, x.seed)
	for {
		t := x.table(m)
		mask := uint64(len(t.slots) - 1)
		i := m & mask
		for ; ; i = (i + 1) & mask {
			e := &t.slots[i]
			if e.n == 0 {
				break
			}
			if e.hash == hash {
				return e, true
			}
		}
		if (t.count+1)*4 <= len(t.slots)*3 {
			t.count++
			x.count++
			e := &t.slots[i]
			e.hash = hash
			return e, false
		}
		x.enlarge(t, m)
	}
}

// enlarge doubles t, or splits it when it is at its largest.
func (x *prefixIndex) enlarge(t *indexTable, m uint64) {
	if len(t.slots) < maxTableSlots || t.depth >= maxDepth {
		old := t.slots
		t.slots = make([]indexEntry, 2*len(old))
		for i := range old {
			if old[i].n != 0 {
				t.place(old[i], mix(old[i].hash, x.seed))
			}
		}
		return
	}
	if t.depth == x.depth {
		dir := make([]*indexTable, 2*len(x.dir))
		for i, d := range x.dir {
			dir[2*i], dir[2*i+1] = d, d
		}
		x.dir = dir
		x.depth++
	}
	// t covers dir[first : first+span]; its hashes differ in bit 63-t.depth.
	span := 1 << (x.depth - t.depth)
	first := int(m>>(64-x.depth)) &^ (span - 1)
	lo := &indexTable{slots: make([]indexEntry, len(t.slots)), depth: t.depth + 1}
	hi := &indexTable{slots: make([]indexEntry, len(t.slots)), depth: t.depth + 1}
	bit := 63 - t.depth
	for i := range t.slots {
		if e := t.slots[i]; e.n != 0 {
			em := mix(e.hash, x.seed)
			dst := lo
			if em>>bit&1 != 0 {
				dst = hi
			}
			dst.place(e, em)
			dst.count++
		}
	}
	for k := range span {
		if k < span/2 {
			x.dir[first+k] = lo
		} else {
			x.dir[first+k] = hi
		}
	}
}

// place stores e (not present) in the first free slot of its probe sequence.
func (t *indexTable) place(e indexEntry, m uint64) {
	mask := uint64(len(t.slots) - 1)
	i := m & mask
	for t.slots[i].n != 0 {
		i = (i + 1) & mask
	}
	t.slots[i] = e
}

// locate returns the table and slot of hash's entry; ok is false when no
// instance holds it.
func (x *prefixIndex) locate(hash uint64) (t *indexTable, i uint64, ok bool) {
	m := mix(hash, x.seed)
	t = x.table(m)
	mask := uint64(len(t.slots) - 1)
	for i = m & mask; ; i = (i + 1) & mask {
		e := &t.slots[i]
		if e.n == 0 {
			return t, i, false
		}
		if e.hash == hash {
			return t, i, true
		}
	}
}

// deleteAt empties slot i of t, shifting later entries of the probe run
// back so that every entry stays reachable from its home slot.
func (x *prefixIndex) deleteAt(t *indexTable, i uint64) {
	mask := uint64(len(t.slots) - 1)
	for j := (i + 1) & mask; t.slots[j].n != 0; j = (j + 1) & mask {
		// The entry at j may move to the hole at i unless its home lies
		// cyclically in (i, j].
		home := mix(t.slots[j].hash, x.seed) & mask
		if (j-home)&mask >= (j-i)&mask {
			t.slots[i] = t.slots[j]
			i = j
		}
	}
	t.slots[i] = indexEntry{}
	t.count--
	x.count--
}

// newList returns the index of an empty list in x.lists.
func (x *prefixIndex) newList() uint32 {
	if n := len(x.freeLists); n > 0 {
		i := x.freeLists[n-1]
		x.freeLists = x.freeLists[:n-1]
		return i
	}
	return x.lists.push()
}

// newBitset returns the index of a zeroed bitset of x.words words.
func (x *prefixIndex) newBitset() uint32 {
	var i uint32
	if n := len(x.freeSets); n > 0 {
		i = x.freeSets[n-1]
		x.freeSets = x.freeSets[:n-1]
	} else {
		i = x.bitsets.push()
	}
	*x.bitsets.at(i) = zeroed(*x.bitsets.at(i), x.words)
	return i
}

func (x *prefixIndex) freeList(i uint32) {
	*x.lists.at(i) = (*x.lists.at(i))[:0]
	x.freeLists = append(x.freeLists, i)
}

func (x *prefixIndex) freeBitset(i uint32) {
	*x.bitsets.at(i) = (*x.bitsets.at(i))[:0]
	x.freeSets = append(x.freeSets, i)
}

// toBitset moves the holders of e (inline or a list, plus slot) to a new
// bitset.
func (x *prefixIndex) toBitset(e *indexEntry, ids []uint32, slot uint32) {
	if x.words == 1 {
		w := uint64(1) << (slot % 64)
		for _, h := range ids {
			w |= 1 << (h % 64)
		}
		e.n = wordFlag | (e.n&countMask + 1)
		e.s = [inlineHolders]uint32{uint32(w), uint32(w >> 32)}
		return
	}
	bi := x.newBitset()
	d := *x.bitsets.at(bi)
	for _, h := range ids {
		d[h/64] |= 1 << (h % 64)
	}
	d[slot/64] |= 1 << (slot % 64)
	e.n = bitsetFlag | (e.n&countMask + 1)
	e.s = [inlineHolders]uint32{bi}
}

func (x *prefixIndex) add(hash uint64, slot uint32) {
	e, found := x.insert(hash)
	if !found {
		e.n, e.s[0] = 1, slot
		x.pairs++
		return
	}
	switch {
	case e.n&wordFlag != 0:
		w := inlineWord(e)
		if slot >= 64 { // the pool grew past one word
			bi := x.newBitset()
			d := *x.bitsets.at(bi)
			d[0] = w
			d[slot/64] |= 1 << (slot % 64)
			e.n = bitsetFlag | (e.n&countMask + 1)
			e.s = [inlineHolders]uint32{bi}
			x.pairs++
			return
		}
		bit := uint64(1) << slot
		if w&bit != 0 {
			return
		}
		w |= bit
		e.s[0], e.s[1] = uint32(w), uint32(w>>32)
		e.n++
		x.pairs++
	case e.n&bitsetFlag != 0:
		d := *x.bitsets.at(e.s[0])
		w := int(slot / 64)
		if w >= len(d) {
			d = append(d, make([]uint64, w+1-len(d))...)
			*x.bitsets.at(e.s[0]) = d
		}
		bit := uint64(1) << (slot % 64)
		if d[w]&bit != 0 {
			return
		}
		d[w] |= bit
		e.n++
		x.pairs++
	case e.n&listFlag != 0:
		li := e.s[0]
		ids := *x.lists.at(li)
		i, found := slices.BinarySearch(ids, slot)
		if found {
			return
		}
		x.pairs++
		if len(ids)+1 > 2*x.words {
			x.toBitset(e, ids, slot)
			*x.lists.at(li) = nil // a bitset stays one while the block is held
			x.freeList(li)
			return
		}
		*x.lists.at(li) = slices.Insert(ids, i, slot)
		e.n++
	default:
		n := e.n
		in := e.s[:n]
		i, found := slices.BinarySearch(in, slot)
		if found {
			return
		}
		x.pairs++
		switch {
		case n < inlineHolders && int(n) < 2*x.words:
			copy(e.s[i+1:n+1], in[i:])
			e.s[i] = slot
			e.n++
		case int(n)+1 > 2*x.words:
			x.toBitset(e, in, slot)
		default:
			li := x.newList()
			ids := *x.lists.at(li)
			if cap(ids) < int(n)+1 {
				ids = make([]uint32, 0, n+1) // one allocation, not one per append
			}
			*x.lists.at(li) = append(append(append(ids, in[:i]...), slot), in[i:]...)
			e.n, e.s = listFlag|(n+1), [inlineHolders]uint32{li}
		}
	}
}

// zeroed returns s resized to n zero words, reusing its array when it can.
func zeroed(s []uint64, n int) []uint64 {
	if cap(s) >= n {
		s = s[:n]
		clear(s)
		return s
	}
	return make([]uint64, n)
}

func (x *prefixIndex) remove(hash uint64, slot uint32) {
	t, at, ok := x.locate(hash)
	if !ok {
		return
	}
	e := &t.slots[at]
	switch {
	case e.n&wordFlag != 0:
		w, bit := inlineWord(e), uint64(1)<<(slot%64)
		if slot >= 64 || w&bit == 0 {
			return
		}
		w &^= bit
		e.s[0], e.s[1] = uint32(w), uint32(w>>32)
		e.n--
		x.pairs--
		if e.n&countMask == 0 {
			x.deleteAt(t, at)
		}
	case e.n&bitsetFlag != 0:
		d := *x.bitsets.at(e.s[0])
		w := int(slot / 64)
		bit := uint64(1) << (slot % 64)
		if w >= len(d) || d[w]&bit == 0 {
			return
		}
		d[w] &^= bit
		e.n--
		x.pairs--
		// A bitset stays one until the block is gone, so a hot block
		// losing holders does not flap.
		if e.n&countMask == 0 {
			x.freeBitset(e.s[0])
			x.deleteAt(t, at)
		}
	case e.n&listFlag != 0:
		li := e.s[0]
		i, found := slices.BinarySearch(*x.lists.at(li), slot)
		if !found {
			return
		}
		ids := slices.Delete(*x.lists.at(li), i, i+1)
		*x.lists.at(li) = ids
		e.n--
		x.pairs--
		if len(ids) <= inlineHolders { // back inline
			e.n = uint32(len(ids))
			copy(e.s[:], ids)
			x.freeList(li)
		}
	default:
		n := e.n
		i, found := slices.BinarySearch(e.s[:n], slot)
		if !found {
			return
		}
		copy(e.s[i:n-1], e.s[i+1:n])
		e.n--
		x.pairs--
		if e.n == 0 {
			x.deleteAt(t, at)
		}
	}
}

// match writes into matched[slot] the number of leading hashes held by each
// slot set in live, for every slot (0 for slots holding none). active and
// next are scratch bitsets of at least x.words words.
//
// While many slots are still matching, the holder sets are intersected a
// bitset word at a time; once at most maxCandidates remain (after the
// shared head of a prompt, typically), each later block only checks those
// slots against its entry.
func (x *prefixIndex) match(hashes []uint64, live []uint64, matched []int32, active, next []uint64) {
	clear(matched)
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
		e = x.find(hashes[k])
		if e == nil {
			setMatched(active, matched, int32(k))
			return
		}
		x.intersect(e, active, next)
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
	if k == len(hashes) {
		setMatched(active, matched, int32(len(hashes)))
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
			}
		}
		nc = kept
	}
	for _, c := range cand[:nc] {
		matched[c] = int32(k)
	}
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

// arena is a growable array of T in fixed chunks, so that growing it never
// copies what it holds (a long stall under the pool's lock for a big index).
type arena[T any] struct {
	chunks [][]T
	n      int
}

const arenaShift = 8 // chunks of 256: little slack for small indexes

func (a *arena[T]) at(i uint32) *T { return &a.chunks[i>>arenaShift][i&(1<<arenaShift-1)] }

// push appends a zero T and returns its index.
func (a *arena[T]) push() uint32 {
	if a.n>>arenaShift == len(a.chunks) {
		a.chunks = append(a.chunks, make([]T, 1<<arenaShift))
	}
	a.n++
	return uint32(a.n - 1)
}

func (a *arena[T]) len() int { return a.n }
