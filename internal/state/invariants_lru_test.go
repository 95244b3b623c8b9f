package state

import (
	"errors"
	"fmt"
)

// checkLRU verifies that l's list is well formed: forward and backward walks
// agree with pos, the free list holds every other node, the capacity holds,
// and pos is a consistent table.
func checkLRU(l *blockLRU) error {
	if l.nodes[0].hash != 0 {
		return errors.New("lru: sentinel has a hash")
	}
	seen := 0
	prev := uint32(0)
	for i := l.nodes[0].next; i != 0; i = l.nodes[i].next {
		if seen > len(l.nodes) {
			return errors.New("lru: forward walk loops")
		}
		n := l.nodes[i]
		if n.prev != prev {
			return fmt.Errorf("lru: node %d prev %d, want %d", i, n.prev, prev)
		}
		if got := l.lookup(n.hash); got != i {
			return fmt.Errorf("lru: pos[%#x] = %d, node is %d", n.hash, got, i)
		}
		prev = i
		seen++
	}
	if l.nodes[0].prev != prev {
		return fmt.Errorf("lru: sentinel prev %d, last node %d", l.nodes[0].prev, prev)
	}
	if seen != l.Len() {
		return fmt.Errorf("lru: list has %d nodes, pos %d", seen, l.Len())
	}
	if err := checkPos(l); err != nil {
		return err
	}
	free := 0
	for i := l.free; i != 0; i = l.nodes[i].next {
		if free > len(l.nodes) {
			return errors.New("lru: free list loops")
		}
		free++
	}
	if seen+free != len(l.nodes)-1 {
		return fmt.Errorf("lru: %d live + %d free nodes, slice has %d", seen, free, len(l.nodes)-1)
	}
	if l.capacity > 0 && seen > l.capacity {
		return fmt.Errorf("lru: %d entries over capacity %d", seen, l.capacity)
	}
	return nil
}

// checkPos verifies l's position table: directory and counts, every slot
// reachable from its home, fingerprints right, each live node once.
func checkPos(l *blockLRU) error {
	p := &l.pos
	if len(p.dir) != 1<<p.depth {
		return fmt.Errorf("pos: directory of %d at depth %d", len(p.dir), p.depth)
	}
	seen := map[uint32]bool{}
	total := 0
	for d, t := range p.dir {
		if t.depth > p.depth {
			return fmt.Errorf("pos: table depth %d over %d", t.depth, p.depth)
		}
		if p.dir[d&(1<<t.depth-1)] != t {
			return fmt.Errorf("pos: directory %d and %d differ at table depth %d", d, d&(1<<t.depth-1), t.depth)
		}
		if d >= 1<<t.depth {
			continue // counted at its first directory entry
		}
		n := len(t.slots)
		if n < posMinSlots || n&(n-1) != 0 || t.count*4 > n*3 {
			return fmt.Errorf("pos: table of %d slots holds %d", n, t.count)
		}
		c := 0
		mask := uint32(n - 1)
		for i, s := range t.slots {
			if s.node == 0 {
				continue
			}
			c++
			if int(s.node) >= len(l.nodes) || seen[s.node] {
				return fmt.Errorf("pos: node %d out of range or twice", s.node)
			}
			seen[s.node] = true
			if fp := p.fingerprint(l.nodes[s.node].hash); fp != s.fp || p.table(fp) != t {
				return fmt.Errorf("pos: node %d has fingerprint %#x, want %#x in this table", s.node, s.fp, fp)
			}
			for k := s.fp & mask; k != uint32(i); k = (k + 1) & mask {
				if t.slots[k].node == 0 {
					return fmt.Errorf("pos: node %d unreachable from its home", s.node)
				}
			}
		}
		if c != t.count {
			return fmt.Errorf("pos: table counts %d, holds %d", t.count, c)
		}
		total += c
	}
	if total != p.count {
		return fmt.Errorf("pos: count %d, tables hold %d", p.count, total)
	}
	return nil
}
