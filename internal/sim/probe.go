package sim

import (
	"fmt"
	"slices"
	"time"

	"github.com/prefixroute/prefixroute/internal/readiness"
	"github.com/prefixroute/prefixroute/internal/state"
	"github.com/prefixroute/prefixroute/scheduler"
)

// probe runs a readiness probe inside an engine. Not safe for concurrent
// use: the simulation loop owns it.
type probe struct {
	cfg     *probeConfig
	routers int
	bs      int
	horizon time.Duration // matches are kept from here on
	// seen: block -> what router 0's picks on From did with it since
	// horizon and before At; gap: blocks carried (hashes[matched_To:])
	// between At and the cutover.
	seen    map[uint64]blockSeen
	gap     map[uint64]bool
	fromIdx int // From's and To's indexes in router 0's snapshot, -1: unknown
	toIdx   int

	fired, cut bool
	fires      int // Migration calls: 1 once fired
	status     readiness.Status
	lo         time.Duration   // the Before span's start
	fromHeld   map[uint64]bool // at the cutover
	toHeld     map[uint64]bool
	recomp     map[uint64]recompute // R (and later)
	batches    []busy               // To's batches started in [At − Window, At)
	reqs       []mixReq             // To's requests arrived in [At − Window, At)
	busyBefore time.Duration
	busyAfter  time.Duration
	after      PrefillMix // tokens, not yet per second
	insts      []*Instance
	snap       map[uint64]bool // From-only at At − Window: requested yet
	snapTaken  bool
}

// blockSeen is what the picks on From did with one block: the last time
// and class of a pick that carried it (in hashes[matched_To:], what the
// tracker's sketch takes), and in which eighths of [At − Window, At) it
// was matched on From deeper than on To (mask) or carried (wmask).
type blockSeen struct {
	last        time.Duration
	class       int16
	mask, wmask uint8
}

// recompute is one block of R: the arrival and class of the request To
// first prefilled it for.
type recompute struct {
	at    time.Duration
	class int16
}

// mixReq is one request To prefilled before the probe: its arrival and its
// PrefillMix in tokens.
type mixReq struct {
	at                       time.Duration
	newT, partial, elsewhere uint32
}

// busy is one prefill batch: its start and length.
type busy struct{ start, d time.Duration }

func newProbe(rc *runConfig, insts []*Instance) *probe {
	pc := rc.probe
	return &probe{cfg: pc, routers: rc.routers, bs: rc.sc.BlockTokens, horizon: pc.at - 2*pc.window,
		seen: map[uint64]blockSeen{}, gap: map[uint64]bool{}, fromIdx: -1, toIdx: -1, insts: insts}
}

// heldOnly returns the blocks some instance of deployment from holds and
// no instance of to.
func heldOnly(insts []*Instance, from, to int) map[uint64]bool {
	out, other := map[uint64]bool{}, map[uint64]bool{}
	for _, in := range insts {
		switch in.Deployment {
		case from:
			in.cache.Each(func(h uint64) { out[h] = false })
		case to:
			in.cache.Each(func(h uint64) { other[h] = true })
		}
	}
	for h := range other {
		delete(out, h)
	}
	return out
}

// pick sees one of router 0's picks: it mirrors, exactly, what the
// tracker's distinct-block sketch records (and what the WhatIf estimators
// and the gap need).
func (p *probe) pick(now time.Duration, r *Request, out *state.Pick) {
	if now < p.horizon || p.cut {
		return
	}
	if !p.fired && now >= p.cfg.at-p.cfg.window {
		if !p.snapTaken {
			p.snap, p.snapTaken = heldOnly(p.insts, p.cfg.from, p.cfg.to), true
		}
		for _, h := range r.Hashes {
			if _, ok := p.snap[h]; ok {
				p.snap[h] = true
			}
		}
	}
	deps := out.Snapshot.Deployments
	if p.fromIdx < 0 || p.fromIdx >= len(deps) || deps[p.fromIdx].Name != p.cfg.spec.From ||
		p.toIdx < 0 || p.toIdx >= len(deps) || deps[p.toIdx].Name != p.cfg.spec.To {
		p.fromIdx = slices.IndexFunc(deps, func(d scheduler.Deployment) bool { return d.Name == p.cfg.spec.From })
		p.toIdx = slices.IndexFunc(deps, func(d scheduler.Deployment) bool { return d.Name == p.cfg.spec.To })
	}
	d := &out.Decision
	if p.fromIdx < 0 || d.Deployment != p.fromIdx {
		return
	}
	hashes := r.Hashes
	mFrom := clampInt(d.Deployments[p.fromIdx].MatchedBlocks, len(hashes))
	mTo := 0
	if p.toIdx >= 0 {
		mTo = clampInt(d.Deployments[p.toIdx].MatchedBlocks, len(hashes))
	}
	if p.fired {
		for _, h := range hashes[mTo:] {
			p.gap[h] = true
		}
		return
	}
	var bit uint8
	if since := now - (p.cfg.at - p.cfg.window); since >= 0 {
		bit = 1 << min(since*8/p.cfg.window, 7)
	}
	for k := mTo; k < len(hashes); k++ {
		b := p.seen[hashes[k]]
		b.wmask |= bit
		b.last, b.class = now, int16(r.Class)
		if k < mFrom {
			b.mask |= bit
		}
		p.seen[hashes[k]] = b
	}
}

func clampInt(v, hi int) int { return max(0, min(v, hi)) }

// fire asks router 0's pool for the estimate at now.
func (p *probe) fire(now time.Duration, pool *state.Pool) error {
	st, err := pool.Migration(epoch.Add(now), readiness.Query{From: p.cfg.spec.From, To: p.cfg.spec.To, TopK: p.cfg.spec.TopK})
	if err != nil {
		return fmt.Errorf("readiness probe at %v: %w", now, err)
	}
	p.fired, p.status = true, st
	p.fires++
	p.lo = now - st.Covered
	for _, b := range p.batches {
		if b.start >= p.lo {
			p.busyBefore += b.d
		}
	}
	p.batches = nil
	return nil
}

// cutover snapshots From's and To's cached blocks as From's weight
// reaches 0.
func (p *probe) cutover(insts []*Instance) {
	p.cut = true
	p.fromHeld, p.toHeld, p.recomp = map[uint64]bool{}, map[uint64]bool{}, map[uint64]recompute{}
	for _, in := range insts {
		switch in.Deployment {
		case p.cfg.from:
			in.cache.Each(func(h uint64) { p.fromHeld[h] = true })
		case p.cfg.to:
			in.cache.Each(func(h uint64) { p.toHeld[h] = true })
		}
	}
}

// batch sees a prefill batch starting on instance in at now: To's busy
// time, its prefill mix, and the actual recompute.
func (p *probe) batch(now time.Duration, in *Instance) {
	if in.Deployment != p.cfg.to {
		return
	}
	c := p.cfg
	d := in.batchEnd - in.batchStart
	switch {
	case !p.fired && now >= c.at-c.window:
		p.batches = append(p.batches, busy{now, d})
	case p.cut && now < c.cut+c.window:
		p.busyAfter += d
	}
	for _, r := range in.batch {
		before := r.Arrival >= c.at-c.window && r.Arrival < c.at
		after := p.cut && r.Arrival >= c.cut
		if !before && !after {
			continue
		}
		m := min(int(r.HitTokens)/p.bs, len(r.Hashes))
		uncached := r.PromptTokens - r.HitTokens
		partial := uncached - uint32(len(r.Hashes)-m)*uint32(p.bs)
		var mix mixReq
		mix.at, mix.partial = r.Arrival, partial
		for _, h := range r.Hashes[m:] {
			switch {
			case after && p.fromHeld[h] && !p.toHeld[h]:
				if _, again := p.recomp[h]; again {
					if r.Arrival < c.cut+c.window {
						p.after.FromOnlyAgain += float64(p.bs)
					}
				} else {
					p.recomp[h] = recompute{at: r.Arrival, class: int16(r.Class)}
					if r.Arrival < c.cut+c.window {
						p.after.FromOnlyFirst += float64(p.bs)
					}
				}
			case in.fleet[h] == 0:
				mix.newT += uint32(p.bs)
			default:
				mix.elsewhere += uint32(p.bs)
			}
		}
		switch {
		case before:
			p.reqs = append(p.reqs, mix)
		case r.Arrival < c.cut+c.window:
			p.after.New += float64(mix.newT)
			p.after.Partial += float64(mix.partial)
			p.after.Elsewhere += float64(mix.elsewhere)
		}
	}
}
