package state

// blockLRU is the set of block hashes the router believes one instance holds,
// in least-recently-used order, bounded by a capacity in blocks. Nodes live in
// one slice linked by index, so an entry costs its slice slot (24 bytes) plus
// its map entry (about 16 bytes), with no allocation per entry once the slice
// has grown. Not safe for concurrent use: the owning Pool's lock guards it.
type blockLRU struct {
	capacity int
	nodes    []lruNode // nodes[0] is the sentinel of the circular list
	free     uint32    // head of the free list (0 = none)
	pos      map[uint64]uint32
}

type lruNode struct {
	hash       uint64
	prev, next uint32
}

func newBlockLRU(capacity int) *blockLRU {
	l := &blockLRU{capacity: capacity, pos: make(map[uint64]uint32)}
	l.nodes = append(l.nodes, lruNode{}) // sentinel: prev = LRU end, next = MRU end
	return l
}

// Len is the number of blocks held.
func (l *blockLRU) Len() int { return len(l.pos) }

// Contains reports whether hash is held, without touching it.
func (l *blockLRU) Contains(hash uint64) bool {
	_, ok := l.pos[hash]
	return ok
}

// Touch makes hash the most recently used entry, inserting it if needed. It
// returns whether hash was newly inserted and, when the insertion pushed the
// set over capacity, the evicted hash.
func (l *blockLRU) Touch(hash uint64) (inserted bool, evicted uint64, didEvict bool) {
	if i, ok := l.pos[hash]; ok {
		l.unlink(i)
		l.pushFront(i)
		return false, 0, false
	}
	if l.capacity > 0 && len(l.pos) >= l.capacity {
		evicted, didEvict = l.evictOldest()
	}
	i := l.alloc(hash)
	l.pos[hash] = i
	l.pushFront(i)
	return true, evicted, didEvict
}

// Remove drops hash; it reports whether hash was held.
func (l *blockLRU) Remove(hash uint64) bool {
	i, ok := l.pos[hash]
	if !ok {
		return false
	}
	delete(l.pos, hash)
	l.unlink(i)
	l.release(i)
	return true
}

// SetCapacity changes the bound and returns the hashes evicted to meet it.
func (l *blockLRU) SetCapacity(capacity int, evicted func(uint64)) {
	l.capacity = capacity
	for capacity > 0 && len(l.pos) > capacity {
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
	delete(l.pos, h)
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
