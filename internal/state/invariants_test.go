package state

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/prefixroute/prefixroute/scheduler"
)

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
			AssignedKVUsage: scheduler.AssignedKVUsage(in.assignedKV, l.KVCapacityBlocks),
			Disconnected:    !in.connected, Draining: l.Draining, Unreachable: in.unreachable, Role: l.Role,
			RunningRequests: l.RunningRequests, LaneKey: scheduler.LaneKey(in.id.Instance)}
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
