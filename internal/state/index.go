package state

import (
	"math/bits"
	"math/rand/v2"
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
