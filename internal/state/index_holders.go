package state

import "slices"

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
func zeroed[T any](s []T, n int) []T {
	if cap(s) >= n {
		s = s[:n]
		clear(s)
		return s
	}
	return make([]T, n)
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
