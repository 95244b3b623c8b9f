package state

import (
	"math/bits"
	"time"

	"github.com/prefixroute/prefixroute/scheduler"
)

// pickChosen decides a ChosenOnly pick without the full snapshot: under the
// read lock it matches the prefix, summarises every deployment into
// scheduler.Summary values — from the standing counts the pool keeps
// (summariseKept) when no instance can be stale and the load term is off,
// else from the per-instance figures it keeps by order index (summarise:
// standing reason from scheduler.Standing, report time, load) — with the
// match and the request's exclusions, draws the deployment with
// scheduler.DecideDeployment and copies that deployment's instances only;
// then it draws the instance with scheduler.DecideInstance, no lock held.
// The result is the one scheduler.Decide gives with Request.ChosenOnly on
// the full snapshot (TestPickChosenMatchesFull), except that
// out.Snapshot.Instances, out.Addresses, out.recs and
// out.Decision.Instances hold the drawn deployment's instances only.
//
// It reports done false, having made no draw, when the pick needs the full
// snapshot: an empty pool, an instance whose figures need Decide (standOdd),
// or a decision that fails (its audit needs every instance).
func (p *Pool) pickChosen(now time.Time, in *PickInput, rng scheduler.RNG, out *Pick) (done bool, err error) {
	p.mu.RLock()
	locked := true
	defer func() {
		if locked {
			p.mu.RUnlock()
		}
	}()
	n, nd := len(p.order), len(p.deps)
	if n == 0 {
		return false, nil
	}
	out.snapAssigns = p.assigns
	cfg := p.cfg.Load()
	pol := &cfg.Policy
	out.Config = cfg
	words := p.index.words
	out.active = grow(out.active, words)
	out.nextBS = grow(out.nextBS, words)
	out.matched = grow(out.matched, words*64)
	p.index.matchLogged(in.Hashes, p.live, nil, out.active, out.nextBS, &out.drops)

	out.Snapshot.Deployments = grow(out.Snapshot.Deployments, nd)
	for i, d := range p.deps {
		out.Snapshot.Deployments[i] = scheduler.Deployment{Name: d.name, Weight: d.weight, Calibration: d.calib,
			Unweighted: cfg.Weights != nil && !d.configured}
	}
	excl := false
	if len(in.Exclude) > 0 {
		out.excl = zeroed(out.excl, (n+63)/64)
		for _, id := range in.Exclude {
			if rec := p.byID[id]; rec != nil {
				out.excl[rec.ord/64] |= 1 << (rec.ord % 64)
				excl = true
			}
		}
	}
	var excluded [scheduler.NumReasons]int
	out.sums = grow(out.sums, nd)
	if !p.summariseKept(now, pol, excl, out, &excluded) {
		// Every slot's count: from the match's log, as matchLogged would
		// have written them.
		clear(out.matched)
		setCounts(out.drops, p.live, out.matched)
		if !p.summarise(now, pol, excl, out, &excluded) {
			return false, nil
		}
	}
	out.prefillWeight = p.backlogWeight(now)
	req := scheduler.Request{PromptTokens: in.PromptTokens, Blocks: len(in.Hashes), ChosenOnly: true, PrefillWeight: out.prefillWeight,
		TTFTTargetMs: in.TTFTTargetMs}
	if scheduler.DecideDeployment(pol, req, out.Snapshot.Deployments, out.sums, &excluded, rng, &out.Decision) != nil {
		return false, nil // no draw made: Decide gives the error with its audit
	}
	p.copyDeployment(now, out.Decision.Deployment, in, out)
	p.mu.RUnlock()
	locked = false
	return true, scheduler.DecideInstance(pol, req, &out.Snapshot, rng, &out.Decision)
}

// summariseKept fills out.sums and excluded as summarise does, from the
// counts the pool keeps (Pool.dcount) instead of every instance, when no
// instance can be stale at now and the load term is off: eligible counts
// and exclusion reasons from the standing counts, adjusted for the
// request's exclusions; each deployment's best match from out.matched over
// the eligible slots' bitset. It reports false, having written nothing
// that summarise does not overwrite, when it cannot. Called with p.mu held
// for reading.
func (p *Pool) summariseKept(now time.Time, pol *scheduler.Policy, excl bool, out *Pick, excluded *[scheduler.NumReasons]int) bool {
	nowRel, fast := p.relTime(now)
	if pol.DeploymentDeltaMs > 0 || !fast || !p.noneStale(nowRel, pol.StaleAfter) {
		return false
	}
	counted := [...]scheduler.Reason{scheduler.ReasonPrefillRole, scheduler.ReasonDisconnected, scheduler.ReasonUnreachable, scheduler.ReasonDraining, scheduler.ReasonKVFull, scheduler.ReasonQueueFull}
	for k := range out.sums {
		c := p.dcount[k*standKinds : (k+1)*standKinds]
		if c[standOdd] > 0 {
			*excluded = [scheduler.NumReasons]int{} // summarise starts afresh
			return false
		}
		out.sums[k] = scheduler.Summary{Eligible: int(c[scheduler.ReasonNone]), Full: int(c[scheduler.ReasonKVFull] + c[scheduler.ReasonQueueFull])}
		for _, r := range counted {
			excluded[r] += int(c[r])
		}
	}
	mask := p.elig
	if excl {
		out.mask = append(out.mask[:0], p.elig...)
		mask = out.mask
		for w, b := range out.excl {
			for ; b != 0; b &= b - 1 {
				ord := w*64 + bits.TrailingZeros64(b)
				st := p.tstand[ord]
				if r := scheduler.ReasonAt(st, false, true); r != st {
					sum := &out.sums[p.tmpl[ord].Deployment]
					switch st {
					case scheduler.ReasonNone:
						sum.Eligible--
					case scheduler.ReasonKVFull, scheduler.ReasonQueueFull:
						sum.Full--
						excluded[st]--
					default:
						excluded[st]--
					}
					excluded[r]++
				}
				slot := p.tslot[ord]
				mask[slot/64] &^= 1 << (slot % 64)
			}
		}
	}
	// Best matches: the match's groups from the longest count down; the
	// first eligible slot met in a deployment is one of its longest. Stop
	// once every deployment with an eligible instance has one (after
	// about nd·ln(nd) slots when they mix), not after every slot.
	remaining := 0
	for k := range out.sums {
		if out.sums[k].Eligible > 0 {
			remaining++
		}
	}
	out.seen = zeroed(out.seen, len(out.sums))
	sdep := p.sdep
	for j := len(out.drops) - 1; j >= 0 && remaining > 0; j-- {
		d := &out.drops[j]
		for b := d.bits & mask[d.w]; b != 0 && remaining > 0; b &= b - 1 {
			k := sdep[int(d.w)*64+bits.TrailingZeros64(b)]
			if !out.seen[k] {
				out.seen[k] = true
				out.sums[k].MatchedBlocks = int(d.k)
				remaining--
			}
		}
	}
	return true
}

// noneStale reports whether no connected instance's report is older than
// staleAfter at nowRel (ns since the age epoch): from the pool's lower bound
// on their report times, recomputed (and stored) when it does not tell.
// Called with p.mu held for reading: concurrent picks store the same value.
func (p *Pool) noneStale(nowRel int64, staleAfter time.Duration) bool {
	m := p.minLast.Load()
	if m == noAge || nowRel-m > int64(staleAfter) {
		m = p.oldestReport()
		p.minLast.Store(m)
	}
	return m != noAge && nowRel-m <= int64(staleAfter)
}

// oldestReport returns the earliest report time (ns since the age epoch) of
// the instances whose standing reason is not ReasonDisconnected: noAge when
// one of them has none comparable, maxRelAge when there is none. Called
// with p.mu held for reading.
func (p *Pool) oldestReport() int64 {
	m := int64(maxRelAge)
	for i, last := range p.tlast[:len(p.order)] {
		if p.tstand[i] == scheduler.ReasonDisconnected {
			continue
		}
		if last == noAge {
			return noAge
		}
		m = min(m, last)
	}
	return m
}

// summarise fills out.sums and excluded from the pool's per-instance
// figures, out.matched and out.excl (when excl). It reports false when an
// instance needs scheduler.Decide. Called with p.mu held for reading.
func (p *Pool) summarise(now time.Time, pol *scheduler.Policy, excl bool, out *Pick, excluded *[scheduler.NumReasons]int) bool {
	nowRel, fast := p.relTime(now)
	staleAfter, loadOn := pol.StaleAfter, pol.DeploymentDeltaMs > 0
	n := len(p.order)
	stand, tlast, tslot, tload, matched := p.tstand[:n], p.tlast[:n], p.tslot[:n], p.tload[:n], out.matched
	for k := range out.sums {
		eligible, full, best := 0, 0, int32(0)
		loads := out.loads[:0]
		for i := p.dstart[k]; i < p.dstart[k+1]; i++ {
			st := stand[i]
			if st == standOdd {
				return false
			}
			// The report age exactly as snapshot computes it.
			var stale bool
			if last := tlast[i]; fast && last != noAge {
				stale = time.Duration(max(0, nowRel-last)) > staleAfter
			} else {
				stale = max(0, now.Sub(p.order[i].lastReport)) > staleAfter
			}
			r := scheduler.ReasonAt(st, stale, excl && out.excl[i/64]&(1<<(i%64)) != 0)
			if r != scheduler.ReasonNone {
				excluded[r]++
				if r == scheduler.ReasonKVFull || r == scheduler.ReasonQueueFull {
					full++
				}
				continue
			}
			eligible++
			if m := matched[tslot[i]]; m > best { // a branch: no chain of dependent max
				best = m
			}
			if loadOn {
				loads = append(loads, tload[i])
			}
		}
		s := scheduler.Summary{Eligible: eligible, MatchedBlocks: int(best), Full: full}
		if loadOn {
			s.LoadMs = scheduler.SoftMinLoadMs(pol, loads)
			out.loads = loads
		}
		out.sums[k] = s
	}
	return true
}

// copyDeployment fills out.Snapshot.Instances, out.Addresses and out.recs
// with deployment k's instances, as snapshot fills the whole pool's, their
// matched counts from the match's log (out.drops). Called with p.mu held
// for reading.
func (p *Pool) copyDeployment(now time.Time, k int, in *PickInput, out *Pick) {
	a, b := p.dstart[k], p.dstart[k+1]
	out.dmask = zeroed(out.dmask, p.index.words)
	for _, slot := range p.tslot[a:b] {
		out.dmask[slot/64] |= 1 << (slot % 64)
	}
	setCounts(out.drops, out.dmask, out.matched)
	insts := grow(out.Snapshot.Instances, b-a)
	out.Snapshot.Instances = insts
	out.Addresses = grow(out.Addresses, b-a)
	out.recs = grow(out.recs, b-a)
	copy(insts, p.tmpl[a:b])
	copy(out.Addresses, p.addrs[a:b])
	copy(out.recs, p.order[a:b])
	nowRel, fast := p.relTime(now)
	for j := range insts {
		i, si := a+j, &insts[j]
		si.MatchedBlocks = int(out.matched[p.tslot[i]])
		if last := p.tlast[i]; fast && last != noAge {
			si.ReportAge = time.Duration(max(0, nowRel-last))
		} else {
			si.ReportAge = max(0, now.Sub(p.order[i].lastReport))
		}
	}
	for _, id := range in.Exclude {
		if rec := p.byID[id]; rec != nil && rec.ord >= a && rec.ord < b {
			insts[rec.ord-a].Excluded = true
		}
	}
}

// replayRNG returns first, then rest's values: a decision retried on the
// whole pool after pickChosen drew its deployment (ErrSLODeploymentMiss)
// draws exactly what a full decision from the start would have.
type replayRNG struct {
	first float64
	used  bool
	rest  scheduler.RNG
}

// Float64 implements scheduler.RNG.
func (r *replayRNG) Float64() float64 {
	if !r.used {
		r.used = true
		return r.first
	}
	return r.rest.Float64()
}
