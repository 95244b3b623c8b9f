package state

import (
	"fmt"
	"math/bits"
	"slices"
)

// holders is a test view of one block's holder set, as the index stores it:
// the sorted slot list ids (inline in the entry or in a holderSet), or the
// bitset dense; n is the number of holders.
type holders struct {
	ids   []uint32
	dense []uint64
	n     int
}

// view returns every block of x with a copy of its holder set.
func (x *prefixIndex) view() map[uint64]*holders {
	out := map[uint64]*holders{}
	x.eachEntry(func(_ *indexTable, _ int, e *indexEntry) {
		h := &holders{n: int(e.n & countMask)}
		switch {
		case e.n&wordFlag != 0:
			h.dense = []uint64{inlineWord(e)}
		case e.n&bitsetFlag != 0:
			h.dense = slices.Clone(*x.bitsets.at(e.s[0]))
		case e.n&listFlag != 0:
			h.ids = slices.Clone(*x.lists.at(e.s[0]))
		default:
			h.ids = slices.Clone(e.s[:e.n])
		}
		out[e.hash] = h
	})
	return out
}

// eachEntry calls fn for every held entry, table by table.
func (x *prefixIndex) eachEntry(fn func(t *indexTable, i int, e *indexEntry)) {
	for d := 0; d < len(x.dir); d += 1 << (x.depth - x.dir[d].depth) {
		t := x.dir[d]
		for i := range t.slots {
			if t.slots[i].n != 0 {
				fn(t, i, &t.slots[i])
			}
		}
	}
}

// check verifies the index's own bookkeeping: pairs is the sum of the
// holder counts, every holder set is well formed, and the hash tables are
// consistent (directory, counts, every entry reachable by its probe
// sequence, holder sets used once each or free).
func (x *prefixIndex) check() error {
	if len(x.dir) != 1<<x.depth {
		return fmt.Errorf("index: directory of %d tables at depth %d", len(x.dir), x.depth)
	}
	for d := 0; d < len(x.dir); {
		t := x.dir[d]
		span := 1 << (x.depth - t.depth)
		if t.depth > x.depth || d%span != 0 {
			return fmt.Errorf("index: table at directory %d has depth %d (global %d)", d, t.depth, x.depth)
		}
		for k := d; k < d+span; k++ {
			if x.dir[k] != t {
				return fmt.Errorf("index: directory %d does not point to the table of %d", k, d)
			}
		}
		if n := len(t.slots); n < minTableSlots || n&(n-1) != 0 || t.count*4 > n*3 {
			return fmt.Errorf("index: table of %d slots holds %d", n, t.count)
		}
		c := 0
		for i := range t.slots {
			if t.slots[i].n != 0 {
				c++
			}
		}
		if c != t.count {
			return fmt.Errorf("index: table counts %d entries, holds %d", t.count, c)
		}
		d += span
	}
	pairs, blocks := 0, 0
	usedLists, usedSets := map[uint32]bool{}, map[uint32]bool{}
	var err error
	x.eachEntry(func(t *indexTable, i int, e *indexEntry) {
		if err != nil {
			return
		}
		blocks++
		m := mix(e.hash, x.seed)
		if x.table(m) != t {
			err = fmt.Errorf("index: block %#x in the wrong table", e.hash)
			return
		}
		mask := len(t.slots) - 1
		for k := int(m) & mask; k != i; k = (k + 1) & mask {
			if t.slots[k].n == 0 {
				err = fmt.Errorf("index: block %#x unreachable from its home slot", e.hash)
				return
			}
			if t.slots[k].hash == e.hash {
				err = fmt.Errorf("index: block %#x present twice", e.hash)
				return
			}
		}
		if x.find(e.hash) != e {
			err = fmt.Errorf("index: find(%#x) misses its entry", e.hash)
			return
		}
		n := int(e.n & countMask)
		if n <= 0 {
			err = fmt.Errorf("index: block %#x has %d holders but is present", e.hash, n)
			return
		}
		pairs += n
		switch e.n &^ countMask {
		case 0:
			if n > inlineHolders || n > 2*x.words {
				err = fmt.Errorf("index: block %#x has %d inline holders", e.hash, n)
				return
			}
			err = checkSparse(x, e.hash, e.s[:n])
		case wordFlag:
			if c := bits.OnesCount64(inlineWord(e)); c != n || e.s[2] != 0 {
				err = fmt.Errorf("index: block %#x: inline bitset has %d bits, n is %d", e.hash, c, n)
			}
		case bitsetFlag:
			bi := e.s[0]
			if int(bi) >= x.bitsets.len() || usedSets[bi] {
				err = fmt.Errorf("index: block %#x: bitset %d out of range or shared", e.hash, bi)
				return
			}
			usedSets[bi] = true
			d := *x.bitsets.at(bi)
			c := 0
			for _, w := range d {
				c += bits.OnesCount64(w)
			}
			if c != n {
				err = fmt.Errorf("index: block %#x: bitset has %d bits, n is %d", e.hash, c, n)
				return
			}
			if len(d) == 0 || len(d) > x.words {
				err = fmt.Errorf("index: block %#x: bitset of %d words, index has %d", e.hash, len(d), x.words)
			}
		case listFlag:
			li := e.s[0]
			if int(li) >= x.lists.len() || usedLists[li] {
				err = fmt.Errorf("index: block %#x: list %d out of range or shared", e.hash, li)
				return
			}
			usedLists[li] = true
			ids := *x.lists.at(li)
			if len(ids) != n {
				err = fmt.Errorf("index: block %#x: %d ids, n is %d", e.hash, len(ids), n)
				return
			}
			if n <= inlineHolders {
				err = fmt.Errorf("index: block %#x: %d holders in a list, should be inline", e.hash, n)
				return
			}
			err = checkSparse(x, e.hash, ids)
		default:
			err = fmt.Errorf("index: block %#x is dense and sparse at once", e.hash)
		}
	})
	if err != nil {
		return err
	}
	if pairs != x.pairs {
		return fmt.Errorf("index: pairs is %d, holder sets sum to %d", x.pairs, pairs)
	}
	if blocks != x.count {
		return fmt.Errorf("index: count is %d, tables hold %d blocks", x.count, blocks)
	}
	for _, f := range x.freeLists {
		if int(f) >= x.lists.len() || usedLists[f] || len(*x.lists.at(f)) != 0 {
			return fmt.Errorf("index: free list %d out of range, in use or not empty", f)
		}
		usedLists[f] = true
	}
	for _, f := range x.freeSets {
		if int(f) >= x.bitsets.len() || usedSets[f] {
			return fmt.Errorf("index: free bitset %d out of range or in use", f)
		}
		usedSets[f] = true
	}
	if len(usedLists) != x.lists.len() || len(usedSets) != x.bitsets.len() {
		return fmt.Errorf("index: %d lists and %d bitsets, %d and %d used or free", x.lists.len(), x.bitsets.len(), len(usedLists), len(usedSets))
	}
	return nil
}

// checkSparse checks a sorted slot list of block hash.
func checkSparse(x *prefixIndex, hash uint64, ids []uint32) error {
	if len(ids) > 2*x.words {
		return fmt.Errorf("index: block %#x: %d sparse ids over %d words, should be dense", hash, len(ids), x.words)
	}
	for i := 1; i < len(ids); i++ {
		if ids[i-1] >= ids[i] {
			return fmt.Errorf("index: block %#x: ids not sorted and unique: %v", hash, ids)
		}
	}
	if len(ids) > 0 && int(ids[len(ids)-1]) >= x.words*64 {
		return fmt.Errorf("index: block %#x: slot %d beyond %d words", hash, ids[len(ids)-1], x.words)
	}
	return nil
}

// holds reports whether slot holds hash in the index.
func (x *prefixIndex) holds(hash uint64, slot uint32) bool {
	e := x.find(hash)
	return e != nil && x.has(e, slot)
}

// each calls fn for every slot of h in increasing order.
func (h *holders) each(fn func(uint32)) {
	if h.dense == nil {
		for _, s := range h.ids {
			fn(s)
		}
		return
	}
	for w, b := range h.dense {
		for ; b != 0; b &= b - 1 {
			fn(uint32(w*64 + bits.TrailingZeros64(b)))
		}
	}
}
