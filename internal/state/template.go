package state

import "github.com/prefixroute/prefixroute/scheduler"

// The snapshot template: each instance's scheduler figures, kept up to date
// under Pool.mu as reports and picks change them, so that a pick copies
// them instead of computing them.

// syncInstance copies in's figures into the snapshot template. Called with
// p.mu held, whenever they change.
func (p *Pool) syncInstance(in *instance) {
	si := &p.tmpl[in.ord]
	*si = scheduler.Instance{}
	si.ID = in.id.Instance
	si.LaneKey = in.laneKey
	si.Deployment = in.dep
	si.Disconnected = !in.connected
	p.addrs[in.ord] = in.id.Address
	p.tslot[in.ord] = in.slot
	p.syncReport(in)
}

// syncReport copies the figures of in's last report, its assigned work and
// its report time into the snapshot template. Called with p.mu held.
func (p *Pool) syncReport(in *instance) {
	l := &in.last
	si := &p.tmpl[in.ord]
	si.BlockSizeTokens = l.BlockSizeTokens
	si.PrefillTokensPerSecond = l.PrefillTokensPerSecond
	si.QueuedPrefillTokens, si.QueueMs = in.ledger.queueFrom(l, p.defaultTPS())
	si.HasQueueMs = l.HasQueueMs
	si.AssignedTokens = in.assigned
	si.KVUsage = l.KVCacheUsage
	si.AssignedKVUsage = scheduler.AssignedKVUsage(in.assignedKV, l.KVCapacityBlocks)
	si.Draining = l.Draining
	si.Role = l.Role
	si.RunningRequests = l.RunningRequests
	si.Unreachable = in.unreachable
	p.tlast[in.ord] = noAge
	if in.reported {
		if !p.hasEpoch {
			p.ageEpoch, p.ageMono, p.hasEpoch = in.lastReport, hasMono(in.lastReport), true
		}
		if ns, ok := p.relTime(in.lastReport); ok {
			p.tlast[in.ord] = ns
		}
	}
	p.syncStanding(in.ord)
}

// standOdd marks a template entry whose figures scheduler.Standing rejects:
// a pick that meets it decides on the full snapshot.
const standOdd = scheduler.NumReasons

// syncStanding recomputes the standing reason and load of the template
// entry at order index ord from its figures and the policy in force.
// Called with p.mu held, whenever they change.
// It also keeps the deployment's standing counts, the eligible bitset and
// the report-time bound (see Pool.dcount), so call it after tlast and
// tslot are set.
func (p *Pool) syncStanding(ord int) {
	si := &p.tmpl[ord]
	r, load, ok := scheduler.StandingCalibrated(&p.cfg.Load().Policy, &p.deps[si.Deployment].calib, si)
	if !ok {
		r = standOdd
	}
	base := si.Deployment * standKinds
	if old := p.tstand[ord]; old != standUncounted {
		p.dcount[base+int(old)]--
	}
	p.dcount[base+int(r)]++
	p.tstand[ord], p.tload[ord] = r, load
	slot := p.tslot[ord]
	if r == scheduler.ReasonNone {
		p.elig[slot/64] |= 1 << (slot % 64)
	} else {
		p.elig[slot/64] &^= 1 << (slot % 64)
	}
	if r != scheduler.ReasonDisconnected {
		// Reports only move a report time forward; one that moves back (or
		// a reconnected instance) lowers the bound.
		switch last, bound := p.tlast[ord], p.minLast.Load(); {
		case last == noAge:
			p.minLast.Store(noAge)
		case bound != noAge && last < bound:
			p.minLast.Store(last)
		}
	}
}

// standKinds is the number of standing reasons a count is kept for
// (scheduler.Reason values up to standOdd).
const standKinds = int(standOdd) + 1

// standUncounted marks a tstand entry resync has not counted yet.
const standUncounted = scheduler.Reason(255)

// resync rebuilds the snapshot template, the live bitset and the
// deployments' ranges from p.order. Called with p.mu held after the order or
// the deployments changed.
func (p *Pool) resync() {
	n := len(p.order)
	p.tmpl = grow(p.tmpl, n)
	p.addrs = grow(p.addrs, n)
	p.tslot = grow(p.tslot, n)
	p.tlast = grow(p.tlast, n)
	p.tstand = grow(p.tstand, n)
	p.tload = grow(p.tload, n)
	p.live = zeroed(p.live, p.index.words)
	p.elig = zeroed(p.elig, p.index.words)
	p.sdep = grow(p.sdep, p.index.words*64)
	p.dstart = zeroed(p.dstart, len(p.deps)+1)
	p.dcount = zeroed(p.dcount, len(p.deps)*standKinds)
	for i := range p.tstand {
		p.tstand[i] = standUncounted
	}
	p.minLast.Store(noAge) // the next pick recomputes it
	for i, in := range p.order {
		in.ord = i
		p.sdep[in.slot] = int32(in.dep)
		p.syncInstance(in)
		p.live[in.slot/64] |= 1 << (in.slot % 64)
		p.dstart[in.dep+1]++ // p.order is sorted by deployment: contiguous
	}
	for k := range p.deps {
		p.dstart[k+1] += p.dstart[k]
	}
}
