package state

import (
	"cmp"
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"testing"
	"time"

	"github.com/prefixroute/prefixroute/scheduler"
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
//     most 2*words entries, or a bitset whose popcount is n), and the hash
//     tables are consistent;
//   - a session is attached exactly when the instance is connected;
//   - the snapshot template and the live bitset agree with the records.
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

	if err := checkTemplate(p); err != nil {
		return err
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
	for hash, h := range p.index.view() {
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

// checkTemplate verifies that the snapshot template, addresses, slots,
// report times and live bitset agree with p.order. Called with p.mu held.
func checkTemplate(p *Pool) error {
	n := len(p.order)
	if len(p.tmpl) != n || len(p.addrs) != n || len(p.tslot) != n || len(p.tlast) != n || len(p.tstand) != n || len(p.tload) != n {
		return fmt.Errorf("template: %d/%d/%d/%d/%d/%d entries for %d instances", len(p.tmpl), len(p.addrs), len(p.tslot), len(p.tlast), len(p.tstand), len(p.tload), n)
	}
	if len(p.dstart) != len(p.deps)+1 || p.dstart[len(p.deps)] != n {
		return fmt.Errorf("template: deployment ranges %v for %d deployments, %d instances", p.dstart, len(p.deps), n)
	}
	live := make([]uint64, p.index.words)
	for i, in := range p.order {
		if in.ord != i {
			return fmt.Errorf("template: instance %s at order %d has ord %d", in.id.Instance, i, in.ord)
		}
		l := &in.last
		want := scheduler.Instance{ID: in.id.Instance, Deployment: in.dep, BlockSizeTokens: l.BlockSizeTokens,
			PrefillTokensPerSecond: l.PrefillTokensPerSecond, QueueMs: l.QueueMs, HasQueueMs: l.HasQueueMs,
			QueuedPrefillTokens: l.QueuedPrefillTokens, AssignedTokens: in.assigned, KVUsage: l.KVCacheUsage,
			Disconnected: !in.connected, Draining: l.Draining}
		if p.tmpl[i] != want {
			return fmt.Errorf("template: instance %s is %+v, want %+v", in.id.Instance, p.tmpl[i], want)
		}
		stand, load, ok := scheduler.Standing(&p.cfg.Load().Policy, &want)
		if !ok {
			stand = standOdd
		}
		if p.tstand[i] != stand || p.tload[i] != load {
			return fmt.Errorf("template: instance %s standing %v load %v, want %v %v", in.id.Instance, p.tstand[i], p.tload[i], stand, load)
		}
		if k := in.dep; k >= len(p.deps) || i < p.dstart[k] || i >= p.dstart[k+1] {
			return fmt.Errorf("template: instance %s at order %d outside its deployment %d's range %v", in.id.Instance, i, k, p.dstart)
		}
		if p.addrs[i] != in.id.Address || p.tslot[i] != in.slot {
			return fmt.Errorf("template: instance %s address %q slot %d, want %q %d", in.id.Instance, p.addrs[i], p.tslot[i], in.id.Address, in.slot)
		}
		if last := p.tlast[i]; last != noAge {
			if rel, ok := p.relTime(in.lastReport); !in.reported || !ok || rel != last {
				return fmt.Errorf("template: instance %s report time %d, want %d (%v, reported %v)", in.id.Instance, last, rel, ok, in.reported)
			}
		} else if _, ok := p.relTime(in.lastReport); in.reported && ok {
			return fmt.Errorf("template: instance %s has no report time", in.id.Instance)
		}
		if int(in.slot) < len(live)*64 {
			live[in.slot/64] |= 1 << (in.slot % 64)
		}
	}
	if !slices.Equal(live, p.live) {
		return fmt.Errorf("template: live bitset %x, want %x", p.live, live)
	}
	return checkKept(p)
}

// checkKept verifies what the pool keeps for pickChosen's kept counts: the
// standing counts per deployment, the eligible bitset, each slot's
// deployment and the lower bound on the connected instances' report times.
func checkKept(p *Pool) error {
	count := make([]int32, len(p.deps)*standKinds)
	elig := make([]uint64, p.index.words)
	oldest := int64(maxRelAge)
	for i, in := range p.order {
		st := p.tstand[i]
		count[in.dep*standKinds+int(st)]++
		if st == scheduler.ReasonNone {
			elig[in.slot/64] |= 1 << (in.slot % 64)
		}
		if p.sdep[in.slot] != int32(in.dep) {
			return fmt.Errorf("kept: slot %d in deployment %d, want %d", in.slot, p.sdep[in.slot], in.dep)
		}
		if st != scheduler.ReasonDisconnected && oldest != noAge {
			if p.tlast[i] == noAge {
				oldest = noAge
			} else {
				oldest = min(oldest, p.tlast[i])
			}
		}
	}
	if !slices.Equal(count, p.dcount) {
		return fmt.Errorf("kept: standing counts %v, want %v", p.dcount, count)
	}
	if !slices.Equal(elig, p.elig) {
		return fmt.Errorf("kept: eligible bitset %x, want %x", p.elig, elig)
	}
	if bound := p.minLast.Load(); bound != noAge && (oldest == noAge || bound > oldest) {
		return fmt.Errorf("kept: report-time bound %d above the oldest report %d", bound, oldest)
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
