package state

import "math/rand/v2"

// blockLRU is the set of block hashes the router believes one instance holds,
// in least-recently-used order, bounded by a capacity in blocks. Nodes live in
// one slice linked by index (16 bytes each), found by hash through posTable,
// an open-addressing table of 8-byte slots; so an entry costs about 34 bytes
// (BenchmarkIndexMemory), with no allocation per entry once the slices have
// grown. Not safe for concurrent use: the owning Pool's lock guards it.
type blockLRU struct {
	capacity int
	nodes    []lruNode // nodes[0] is the sentinel of the circular list
	free     uint32    // head of the free list (0 = none)
	pos      posTable  // hash -> node
}

type lruNode struct {
	hash       uint64
	prev, next uint32
}

func newBlockLRU(capacity int) *blockLRU {
	l := &blockLRU{capacity: capacity, pos: newPosTable()}
	l.nodes = append(l.nodes, lruNode{}) // sentinel: prev = LRU end, next = MRU end
	return l
}

// Len is the number of blocks held.
func (l *blockLRU) Len() int { return l.pos.count }

// Contains reports whether hash is held, without touching it.
func (l *blockLRU) Contains(hash uint64) bool {
	return l.lookup(hash) != 0
}

// lookup returns hash's node, 0 when hash is not held.
func (l *blockLRU) lookup(hash uint64) uint32 {
	fp := l.pos.fingerprint(hash)
	t := l.pos.table(fp)
	mask := uint32(len(t.slots) - 1)
	for i := fp & mask; ; i = (i + 1) & mask {
		s := t.slots[i]
		if s.node == 0 {
			return 0
		}
		if s.fp == fp && l.nodes[s.node].hash == hash {
			return s.node
		}
	}
}

// touch loads the position slot of hash (see prefixIndex.touch).
func (l *blockLRU) touch(hash uint64) {
	fp := l.pos.fingerprint(hash)
	t := l.pos.table(fp)
	l.pos.sink += t.slots[fp&uint32(len(t.slots)-1)].node
}

// oldest returns up to n hashes from the least recently used end, oldest
// first, appended to buf.
func (l *blockLRU) oldest(buf []uint64, n int) []uint64 {
	for i := l.nodes[0].prev; i != 0 && n > 0; i, n = l.nodes[i].prev, n-1 {
		buf = append(buf, l.nodes[i].hash)
	}
	return buf
}

// Touch makes hash the most recently used entry, inserting it if needed. It
// returns whether hash was newly inserted and, when the insertion pushed the
// set over capacity, the evicted hash.
func (l *blockLRU) Touch(hash uint64) (inserted bool, evicted uint64, didEvict bool) {
	if i := l.lookup(hash); i != 0 {
		if l.nodes[0].next != i {
			l.unlink(i)
			l.pushFront(i)
		}
		return false, 0, false
	}
	if l.capacity > 0 && l.pos.count >= l.capacity {
		evicted, didEvict = l.evictOldest()
	}
	i := l.alloc(hash)
	l.pos.insert(l.pos.fingerprint(hash), i)
	l.pushFront(i)
	return true, evicted, didEvict
}

// Remove drops hash; it reports whether hash was held.
func (l *blockLRU) Remove(hash uint64) bool {
	i := l.lookup(hash)
	if i == 0 {
		return false
	}
	l.pos.delete(l.pos.fingerprint(hash), i)
	l.unlink(i)
	l.release(i)
	return true
}

// SetCapacity changes the bound and returns the hashes evicted to meet it.
func (l *blockLRU) SetCapacity(capacity int, evicted func(uint64)) {
	l.capacity = capacity
	for capacity > 0 && l.pos.count > capacity {
		h, _ := l.evictOldest()
		evicted(h)
	}
}

// Each calls fn for every held hash, most recent first.
func (l *blockLRU) Each(fn func(uint64)) {
	for i := l.nodes[0].next; i != 0; i = l.nodes[i].next {
		fn(l.nodes[i].hash)
	}
}

func (l *blockLRU) evictOldest() (uint64, bool) {
	i := l.nodes[0].prev
	if i == 0 {
		return 0, false
	}
	h := l.nodes[i].hash
	l.pos.delete(l.pos.fingerprint(h), i)
	l.unlink(i)
	l.release(i)
	return h, true
}

func (l *blockLRU) alloc(hash uint64) uint32 {
	if i := l.free; i != 0 {
		l.free = l.nodes[i].next
		l.nodes[i] = lruNode{hash: hash}
		return i
	}
	l.nodes = append(l.nodes, lruNode{hash: hash})
	return uint32(len(l.nodes) - 1)
}

func (l *blockLRU) release(i uint32) {
	l.nodes[i] = lruNode{next: l.free}
	l.free = i
}

func (l *blockLRU) pushFront(i uint32) {
	head := l.nodes[0].next
	l.nodes[i].prev, l.nodes[i].next = 0, head
	l.nodes[head].prev = i // head 0 is the sentinel itself when the list is empty
	l.nodes[0].next = i
}

func (l *blockLRU) unlink(i uint32) {
	n := l.nodes[i]
	l.nodes[n.prev].next = n.next
	l.nodes[n.next].prev = n.prev
}

// posTable maps a block hash to its LRU node. Like the prefix index it is a
// directory of open-addressing tables (linear probing, at most 3/4 full,
// backward-shift deletion) that split rather than grow past posTableSlots,
// so no insertion rehashes more than 32 KiB. A slot holds a 32-bit
// fingerprint of the mixed hash and the node (0, the sentinel, marks an
// empty slot); a fingerprint match is confirmed against the node's hash. The
// home slot is the fingerprint's low bits and the directory index the bits
// above them, so tables split and grow from their slots alone.
type posTable struct {
	dir   []*posSubtable // by the low depth bits of fp >> posHomeBits
	depth uint8
	seed  uint64
	count int
	sink  uint32 // see blockLRU.touch
}

type posSubtable struct {
	slots []posSlot // len is a power of two, at most posTableSlots
	count int
	depth uint8 // local depth
}

type posSlot struct {
	fp, node uint32
}

const (
	posHomeBits   = 12
	posTableSlots = 1 << posHomeBits
	posMinSlots   = 8
	posMaxDepth   = 32 - posHomeBits
)

func newPosTable() posTable {
	return posTable{dir: []*posSubtable{{slots: make([]posSlot, posMinSlots)}}, seed: rand.Uint64()}
}

func (p *posTable) fingerprint(hash uint64) uint32 { return uint32(mix(hash, p.seed)) }

func (p *posTable) table(fp uint32) *posSubtable {
	return p.dir[(fp>>posHomeBits)&(1<<p.depth-1)]
}

// insert adds (fp, node); the hash must not be present.
func (p *posTable) insert(fp, node uint32) {
	for {
		t := p.table(fp)
		if (t.count+1)*4 <= len(t.slots)*3 {
			t.place(posSlot{fp, node})
			t.count++
			p.count++
			return
		}
		p.enlarge(t, fp)
	}
}

func (t *posSubtable) place(s posSlot) {
	mask := uint32(len(t.slots) - 1)
	i := s.fp & mask
	for t.slots[i].node != 0 {
		i = (i + 1) & mask
	}
	t.slots[i] = s
}

// enlarge doubles t, or splits it when it is at its largest.
func (p *posTable) enlarge(t *posSubtable, fp uint32) {
	if len(t.slots) < posTableSlots || t.depth >= posMaxDepth {
		old := t.slots
		t.slots = make([]posSlot, 2*len(old))
		for _, s := range old {
			if s.node != 0 {
				t.place(s)
			}
		}
		return
	}
	if t.depth == p.depth {
		p.dir = append(p.dir, p.dir...)
		p.depth++
	}
	lo := &posSubtable{slots: make([]posSlot, len(t.slots)), depth: t.depth + 1}
	hi := &posSubtable{slots: make([]posSlot, len(t.slots)), depth: t.depth + 1}
	bit := posHomeBits + t.depth
	for _, s := range t.slots {
		if s.node != 0 {
			dst := lo
			if s.fp>>bit&1 != 0 {
				dst = hi
			}
			dst.place(s)
			dst.count++
		}
	}
	// The directory entries of t are those agreeing with fp on t's depth bits.
	low := (fp >> posHomeBits) & (1<<t.depth - 1)
	for i := low; i < uint32(len(p.dir)); i += 1 << t.depth {
		if i>>t.depth&1 == 0 {
			p.dir[i] = lo
		} else {
			p.dir[i] = hi
		}
	}
}

// delete removes node's slot (fp is its fingerprint), shifting later slots
// of the probe run back.
func (p *posTable) delete(fp, node uint32) {
	t := p.table(fp)
	mask := uint32(len(t.slots) - 1)
	i := fp & mask
	for t.slots[i].node != node {
		i = (i + 1) & mask
	}
	for j := (i + 1) & mask; t.slots[j].node != 0; j = (j + 1) & mask {
		home := t.slots[j].fp & mask
		if (j-home)&mask >= (j-i)&mask {
			t.slots[i] = t.slots[j]
			i = j
		}
	}
	t.slots[i] = posSlot{}
	t.count--
	p.count--
}

// placed marks, in lruNode.prev, a node that TouchAll has already put in
// its place; node indexes stay below it.
const placed = 1 << 31

// TouchAll has the effect of Touch(hashes[k]) for k from len(hashes)-1 down
// to 0 (the first hash ends most recent) when none of those calls would
// evict: the distinct hashes go to the front in order of first occurrence,
// the other entries keep their order. It returns false, having changed
// nothing, when an eviction could happen (fewer free places than absent
// hashes); the caller then touches one by one. Each hash inserted is added
// to index x as held by slot. nodes is scratch space, returned for reuse.
//
// Hashes recorded together stay linked in order, so a node's successor is
// tried before the position table: a prefix cached by an earlier request
// costs one lookup per contiguous run instead of one per block.
func (l *blockLRU) TouchAll(hashes []uint64, nodes []uint32, x *prefixIndex, slot uint32) (ok bool, scratch []uint32) {
	if len(l.nodes)+len(hashes) >= placed {
		return false, nodes
	}
	nodes = grow(nodes, len(hashes))
	absent, prev := 0, uint32(0)
	for k, h := range hashes {
		i := uint32(0)
		if prev != 0 {
			if nx := l.nodes[prev].next; nx != 0 && l.nodes[nx].hash == h {
				i = nx
			}
		}
		if i == 0 {
			i = l.lookup(h)
		}
		if i == 0 {
			absent++
		}
		nodes[k], prev = i, i
	}
	if l.capacity > 0 && l.pos.count+absent > l.capacity {
		return false, nodes
	}
	// Place each distinct hash after the previous one: cursor is the last
	// placed node (0, the sentinel, before the first).
	cursor, n := uint32(0), 0
	for k, h := range hashes {
		i := nodes[k]
		if i == 0 {
			if i = l.lookup(h); i == 0 { // not inserted by an earlier duplicate
				i = l.alloc(h)
				l.pos.insert(l.pos.fingerprint(h), i)
				x.add(h, slot)
				l.insertAfter(cursor, i)
			}
		} else if l.nodes[i].prev&placed == 0 && l.nodes[cursor].next != i {
			l.unlink(i)
			l.insertAfter(cursor, i)
		}
		if l.nodes[i].prev&placed != 0 {
			continue // a duplicate: placed at its first occurrence
		}
		l.nodes[i].prev |= placed
		cursor = i
		n++
	}
	for i := l.nodes[0].next; n > 0; i, n = l.nodes[i].next, n-1 {
		l.nodes[i].prev &^= placed
	}
	return true, nodes
}

// insertAfter links node i (unlinked) after node c.
func (l *blockLRU) insertAfter(c, i uint32) {
	nx := l.nodes[c].next
	l.nodes[i].prev, l.nodes[i].next = c, nx
	l.nodes[nx].prev = i
	l.nodes[c].next = i
}
