package sim

// Cache is an emulated instance's prefix (KV) cache: the block hashes the
// instance prefilled (or decoded), in least-recently-used order, never more
// than its capacity. Nodes live in one slice linked by index, so a warm
// cache allocates nothing per operation. Not safe for concurrent use.
type Cache struct {
	capacity int
	nodes    []cacheNode // nodes[0] is the sentinel: next = most recent, prev = least
	free     int32       // head of the free list, 0 = none
	pos      map[uint64]int32
}

type cacheNode struct {
	hash       uint64
	prev, next int32
}

// NewCache returns an empty cache of capacity blocks (at least 1).
func NewCache(capacity int) *Cache {
	capacity = max(capacity, 1)
	return &Cache{capacity: capacity, nodes: make([]cacheNode, 1, min(capacity, 1<<16)+1),
		pos: make(map[uint64]int32, min(capacity, 1<<16))}
}

// Len is the number of blocks held; Capacity the bound.
func (c *Cache) Len() int      { return len(c.pos) }
func (c *Cache) Capacity() int { return c.capacity }

// Contains reports whether h is held, without touching it.
func (c *Cache) Contains(h uint64) bool {
	_, ok := c.pos[h]
	return ok
}

// Match returns how many of hashes, from the first, are held, without
// touching them.
func (c *Cache) Match(hashes []uint64) int {
	for k, h := range hashes {
		if _, ok := c.pos[h]; !ok {
			return k
		}
	}
	return len(hashes)
}

// Touch makes h the most recently used block if it is held, and reports
// whether it was.
func (c *Cache) Touch(h uint64) bool {
	i, ok := c.pos[h]
	if ok {
		c.unlink(i)
		c.pushFront(i)
	}
	return ok
}

// Insert makes h the most recently used block, adding it if needed; when
// the cache was full, the least recently used block is evicted first and
// returned.
func (c *Cache) Insert(h uint64) (inserted bool, evicted uint64, didEvict bool) {
	if c.Touch(h) {
		return false, 0, false
	}
	if len(c.pos) >= c.capacity {
		i := c.nodes[0].prev
		evicted, didEvict = c.nodes[i].hash, true
		delete(c.pos, evicted)
		c.unlink(i)
		c.nodes[i] = cacheNode{next: c.free}
		c.free = i
	}
	var i int32
	if c.free != 0 {
		i = c.free
		c.free = c.nodes[i].next
		c.nodes[i] = cacheNode{hash: h}
	} else {
		c.nodes = append(c.nodes, cacheNode{hash: h})
		i = int32(len(c.nodes) - 1)
	}
	c.pos[h] = i
	c.pushFront(i)
	return true, evicted, didEvict
}

// Each calls fn for every held block, most recent first.
func (c *Cache) Each(fn func(h uint64)) {
	for i := c.nodes[0].next; i != 0; i = c.nodes[i].next {
		fn(c.nodes[i].hash)
	}
}

func (c *Cache) pushFront(i int32) {
	head := c.nodes[0].next
	c.nodes[i].prev, c.nodes[i].next = 0, head
	c.nodes[head].prev = i
	c.nodes[0].next = i
}

func (c *Cache) unlink(i int32) {
	n := c.nodes[i]
	c.nodes[n.prev].next = n.next
	c.nodes[n.next].prev = n.prev
}
