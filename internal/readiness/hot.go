package readiness

// hotTable is the hot-prefix table: Space-Saving (Metwally, Agrawal and El
// Abbadi, "Efficient computation of frequent and top-k elements in data
// streams", 2005) keyed by a request's first block hash, with each entry's
// count kept per bucket of the window ring so that the count is "requests
// in the window".
//
// A request whose key is in the table adds 1 to its entry in the current
// bucket. A new key takes a free entry, or else replaces the entry with the
// smallest windowed count (ties: the lowest entry index) and inherits that
// entry's per-bucket counts, so its windowed count is that minimum + 1; the
// inherited minimum is its over (the overestimate bound).
//
// The bound: while no bucket leaves the window this is exactly Space-Saving
// over the window's requests, so for every entry
//
//	count − over ≤ true requests in the window ≤ count,   over ≤ N/capacity
//
// (N the requests with block hashes in the window) and every key with more
// than N/capacity requests is in the table. The inherited counts sit in
// buckets no later than the admission's, so they leave the window with
// those buckets: Status reports min(over, the entry's count in the window's
// buckets up to the admission's, less the admitting request), 0 once the
// admission bucket has left. With expiry the upper bound can fail for a key
// evicted and readmitted inside one window: its earlier requests may be
// dropped with the entry it lost.
//
// Lookup is an open-addressing index (linear probing, backward-shift
// deletion, no tombstones) of twice the capacity; eviction scans the
// windowed counts, O(capacity). Nothing allocates once each entry's chain
// slice has grown to the longest chain it holds (≤ MaxHotBlocks). Guarded by
// the Tracker's mutex.
type hotTable struct {
	size      int // capacity
	nb        int // buckets of the ring
	maxBlocks int
	n         int // entries in use: 0..n-1

	keys   []uint64   // first block hash
	chains [][]uint64 // longest chain seen, ≤ maxBlocks; reused on replacement
	prompt []uint32   // prompt tokens of the last request
	bs     []uint32   // block size of the last request's chosen instance
	over   []uint64   // Space-Saving overestimate inherited on admission
	overAt []int64    // epoch of that admission
	total  []uint64   // windowed count relative to the ring's head
	counts []uint64   // per bucket: counts[slot*size+entry]
	index  []int32    // entry+1, 0 = empty
	mask   uint64
}

func newHotTable(size, nb, maxBlocks int) hotTable {
	ix := 2
	for ix < 2*size {
		ix <<= 1
	}
	return hotTable{
		size: size, nb: nb, maxBlocks: maxBlocks,
		keys: make([]uint64, size), chains: make([][]uint64, size),
		prompt: make([]uint32, size), bs: make([]uint32, size),
		over: make([]uint64, size), overAt: make([]int64, size),
		total: make([]uint64, size), counts: make([]uint64, size*nb),
		index: make([]int32, ix), mask: uint64(ix - 1),
	}
}

// home is key's first probe position. Fibonacci hashing spreads keys whose
// low bits agree (the hashes are uniform, but a client sends them).
func (h *hotTable) home(key uint64) uint64 {
	return (key * 0x9e3779b97f4a7c15 >> 32) & h.mask
}

// find returns key's position in the index and its entry, or the empty
// position where it would go and -1.
func (h *hotTable) find(key uint64) (pos uint64, entry int) {
	for pos = h.home(key); ; pos = (pos + 1) & h.mask {
		v := h.index[pos]
		if v == 0 {
			return pos, -1
		}
		if h.keys[v-1] == key {
			return pos, int(v - 1)
		}
	}
}

// unindex removes the index entry at pos, shifting later members of its
// probe run back so that no lookup stops early.
func (h *hotTable) unindex(pos uint64) {
	h.index[pos] = 0
	for j := (pos + 1) & h.mask; h.index[j] != 0; j = (j + 1) & h.mask {
		k := h.home(h.keys[h.index[j]-1])
		// Move j's entry into the hole unless its home lies cyclically in
		// (pos, j].
		if (j-k)&h.mask >= (j-pos)&h.mask {
			h.index[pos], h.index[j] = h.index[j], 0
			pos = j
		}
	}
}

// record counts one request with block hashes hs (len ≥ 1) in bucket slot
// of epoch e.
func (h *hotTable) record(slot int, e int64, hs []uint64, prompt, bs uint32) {
	key := hs[0]
	pos, i := h.find(key)
	if i < 0 {
		if h.n < h.size {
			i = h.n
			h.n++
		} else {
			i = h.minEntry()
			p, _ := h.find(h.keys[i])
			h.unindex(p)
			pos, _ = h.find(key)
			h.over[i], h.overAt[i] = h.total[i], e
		}
		h.keys[i] = key
		h.index[pos] = int32(i + 1)
		h.chains[i] = h.chains[i][:0]
	}
	h.counts[slot*h.size+i]++
	h.total[i]++
	h.prompt[i], h.bs[i] = prompt, bs
	if c := h.chains[i]; len(hs) > len(c) && len(c) < h.maxBlocks {
		h.chains[i] = append(c[:0], hs[:min(len(hs), h.maxBlocks)]...)
	}
}

// minEntry returns the entry with the smallest windowed count, the lowest
// index among equals. The table is full.
func (h *hotTable) minEntry() int {
	best, bv := 0, h.total[0]
	for i, v := range h.total[1:h.n] {
		if v < bv {
			best, bv = i+1, v
		}
	}
	return best
}

// clearSlot empties bucket slot, which leaves the window.
func (h *hotTable) clearSlot(slot int) {
	col := h.counts[slot*h.size : (slot+1)*h.size]
	for i, c := range col[:h.n] {
		h.total[i] -= c
	}
	clear(col)
}

// windowed returns entry i's count over the ring slots given.
func (h *hotTable) windowed(i int, slots []int) uint64 {
	var c uint64
	for _, s := range slots {
		c += h.counts[s*h.size+i]
	}
	return c
}
