package state

import (
	"cmp"
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"testing"
	"time"
)

// t0 is the fixed base time of every test; tests add durations to it.
var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// newTestPool returns pool "p" of a fresh registry with the given limits.
func newTestPool(t testing.TB, limits Limits) (*Registry, *Pool) {
	t.Helper()
	r := NewRegistry(limits)
	p, err := r.Ensure("p")
	if err != nil {
		t.Fatal(err)
	}
	return r, p
}

// connect opens a session for instance id of deployment dep and applies rep
// (a zero report when nil) at now.
func connect(t testing.TB, p *Pool, now time.Time, dep, id string, rep *Report) *Session {
	t.Helper()
	s, err := p.Connect(now, Identity{Pool: p.Name(), Deployment: dep, Instance: id, Address: id + ":8000"})
	if err != nil {
		t.Fatalf("Connect %s/%s: %v", dep, id, err)
	}
	if rep == nil {
		rep = &Report{}
	}
	if err := s.Report(now, rep); err != nil {
		t.Fatalf("Report %s/%s: %v", dep, id, err)
	}
	return s
}

// mustInvariants fails t when checkInvariants finds a problem.
func mustInvariants(t testing.TB, p *Pool) {
	t.Helper()
	if err := checkInvariants(p); err != nil {
		t.Fatal(err)
	}
}

// statusOf returns the InstanceStatus of id, failing when it is not listed.
func statusOf(t testing.TB, p *Pool, now time.Time, id string) InstanceStatus {
	t.Helper()
	for _, st := range p.Instances(now) {
		if st.Instance == id {
			return st
		}
	}
	t.Fatalf("instance %s not listed", id)
	return InstanceStatus{}
}

// snapIndex returns the snapshot index of instance id in pk.
func snapIndex(t testing.TB, pk *Pick, id string) int {
	t.Helper()
	for i := range pk.Snapshot.Instances {
		if pk.Snapshot.Instances[i].ID == id {
			return i
		}
	}
	t.Fatalf("instance %s not in snapshot", id)
	return -1
}

// checkInvariants checks, under the pool's read lock, that the pool's
// records, deployments, LRUs and prefix index agree with one another:
//
//   - slots, byID and order name the same instances; order is sorted by
//     (deployment, instance id); each instance's dep is its deployment;
//   - deps is sorted, has each deployment with instances (and every
//     configured one) and the right instance counts and weights;
//   - each LRU is a well-formed list within its capacity, and its capacity
//     is the one applyCapacity gives;
//   - the index holds exactly the (hash, slot) pairs of the LRUs, pairs is
//     their count, every holder set is well formed (sorted unique ids of at
//     most 2*words entries, or a bitset whose popcount is n);
//   - a session is attached exactly when the instance is connected.
func checkInvariants(p *Pool) error {
	p.mu.RLock()
	defer p.mu.RUnlock()
	cfg := p.cfg.Load()

	live := 0
	for s, in := range p.slots {
		if in == nil {
			continue
		}
		live++
		if in.slot != uint32(s) {
			return fmt.Errorf("slot %d holds instance %s with slot %d", s, in.id.Instance, in.slot)
		}
		if p.byID[in.id.Instance] != in {
			return fmt.Errorf("byID[%s] is not the record in slot %d", in.id.Instance, s)
		}
		if in.connected != (in.session != nil) {
			return fmt.Errorf("instance %s: connected %v but session %v", in.id.Instance, in.connected, in.session != nil)
		}
		if int(in.slot) >= p.index.words*64 {
			return fmt.Errorf("instance %s: slot %d beyond the index's %d words", in.id.Instance, in.slot, p.index.words)
		}
	}
	if live != len(p.byID) || live != len(p.order) {
		return fmt.Errorf("%d live slots, %d in byID, %d in order", live, len(p.byID), len(p.order))
	}
	for i, in := range p.order {
		if p.slots[in.slot] != in {
			return fmt.Errorf("order[%d] (%s) is not in its slot", i, in.id.Instance)
		}
		if i > 0 {
			a, b := p.order[i-1].id, in.id
			if c := cmp.Or(cmp.Compare(a.Deployment, b.Deployment), cmp.Compare(a.Instance, b.Instance)); c >= 0 {
				return fmt.Errorf("order not sorted at %d: %s/%s then %s/%s", i, a.Deployment, a.Instance, b.Deployment, b.Instance)
			}
		}
	}

	// Deployments.
	count := map[string]int{}
	for _, in := range p.order {
		count[in.id.Deployment]++
	}
	for name := range cfg.Weights {
		count[name] += 0
	}
	if len(p.deps) != len(count) {
		return fmt.Errorf("%d deployments, want %d", len(p.deps), len(count))
	}
	for k, d := range p.deps {
		if k > 0 && p.deps[k-1].name >= d.name {
			return fmt.Errorf("deps not sorted at %d", k)
		}
		n, ok := count[d.name]
		if !ok || n != d.instances {
			return fmt.Errorf("deployment %s: %d instances, want %d (known %v)", d.name, d.instances, n, ok)
		}
		w, conf := 1.0, false
		if cfg.Weights != nil {
			w, conf = cfg.Weights[d.name]
		}
		if d.weight != w || d.configured != conf {
			return fmt.Errorf("deployment %s: weight %v configured %v, want %v %v", d.name, d.weight, d.configured, w, conf)
		}
	}
	for _, in := range p.order {
		if in.dep < 0 || in.dep >= len(p.deps) || p.deps[in.dep].name != in.id.Deployment {
			return fmt.Errorf("instance %s: dep index %d does not name %s", in.id.Instance, in.dep, in.id.Deployment)
		}
	}

	// LRUs against the index.
	pairs := 0
	for _, in := range p.order {
		if err := checkLRU(in.cache); err != nil {
			return fmt.Errorf("instance %s: %v", in.id.Instance, err)
		}
		want := in.last.KVCapacityBlocks
		if want == 0 {
			want = cfg.Policy.DefaultKVCapacityBlocks
		}
		if want == 0 || want > uint64(p.limits.MaxBlocksPerInstance) {
			want = uint64(p.limits.MaxBlocksPerInstance)
		}
		if in.cache.capacity != int(want) {
			return fmt.Errorf("instance %s: LRU capacity %d, want %d", in.id.Instance, in.cache.capacity, want)
		}
		var err error
		in.cache.Each(func(h uint64) {
			if err == nil && !p.index.holds(h, in.slot) {
				err = fmt.Errorf("instance %s holds %#x but the index does not say so", in.id.Instance, h)
			}
		})
		if err != nil {
			return err
		}
		pairs += in.cache.Len()
	}
	if pairs != p.index.pairs {
		return fmt.Errorf("index counts %d pairs, the LRUs hold %d", p.index.pairs, pairs)
	}
	if err := p.index.check(); err != nil {
		return err
	}
	for hash, h := range p.index.entries {
		var err error
		h.each(func(s uint32) {
			if err != nil {
				return
			}
			if int(s) >= len(p.slots) || p.slots[s] == nil {
				err = fmt.Errorf("index: block %#x held by free slot %d", hash, s)
			} else if !p.slots[s].cache.Contains(hash) {
				err = fmt.Errorf("index: block %#x held by slot %d whose LRU lacks it", hash, s)
			}
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// check verifies the index's own bookkeeping: pairs is the sum of the
// holder counts, and every holder set is well formed.
func (x *prefixIndex) check() error {
	pairs := 0
	for hash, h := range x.entries {
		if h.n <= 0 {
			return fmt.Errorf("index: block %#x has %d holders but is present", hash, h.n)
		}
		if h.dense != nil {
			if h.ids != nil {
				return fmt.Errorf("index: block %#x is dense and sparse at once", hash)
			}
			c := 0
			for _, w := range h.dense {
				c += bits.OnesCount64(w)
			}
			if c != h.n {
				return fmt.Errorf("index: block %#x: bitset has %d bits, n is %d", hash, c, h.n)
			}
			if len(h.dense) > x.words {
				return fmt.Errorf("index: block %#x: bitset of %d words, index has %d", hash, len(h.dense), x.words)
			}
		} else {
			if len(h.ids) != h.n {
				return fmt.Errorf("index: block %#x: %d ids, n is %d", hash, len(h.ids), h.n)
			}
			if len(h.ids) > 2*x.words {
				return fmt.Errorf("index: block %#x: %d sparse ids over %d words, should be dense", hash, len(h.ids), x.words)
			}
			for i := 1; i < len(h.ids); i++ {
				if h.ids[i-1] >= h.ids[i] {
					return fmt.Errorf("index: block %#x: ids not sorted and unique: %v", hash, h.ids)
				}
			}
			if len(h.ids) > 0 && int(h.ids[len(h.ids)-1]) >= x.words*64 {
				return fmt.Errorf("index: block %#x: slot %d beyond %d words", hash, h.ids[len(h.ids)-1], x.words)
			}
		}
		pairs += h.n
	}
	if pairs != x.pairs {
		return fmt.Errorf("index: pairs is %d, holder sets sum to %d", x.pairs, pairs)
	}
	return nil
}

// holds reports whether slot holds hash in the index.
func (x *prefixIndex) holds(hash uint64, slot uint32) bool {
	h := x.entries[hash]
	if h == nil {
		return false
	}
	if h.dense != nil {
		w := int(slot / 64)
		return w < len(h.dense) && h.dense[w]&(1<<(slot%64)) != 0
	}
	_, found := slices.BinarySearch(h.ids, slot)
	return found
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

// checkLRU verifies that l's list is well formed: forward and backward walks
// agree with pos, the free list holds every other node, and the capacity
// holds.
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
		if l.pos[n.hash] != i {
			return fmt.Errorf("lru: pos[%#x] = %d, node is %d", n.hash, l.pos[n.hash], i)
		}
		prev = i
		seen++
	}
	if l.nodes[0].prev != prev {
		return fmt.Errorf("lru: sentinel prev %d, last node %d", l.nodes[0].prev, prev)
	}
	if seen != len(l.pos) {
		return fmt.Errorf("lru: list has %d nodes, pos %d", seen, len(l.pos))
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
