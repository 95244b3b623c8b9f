package state

import "time"

// poolIdle is what DropIdle remembers of a pool between sweeps: since when
// it has been seen without instances or configuration, and the pool's
// Ensure count then. Guarded by the pool's mu.
type poolIdle struct {
	since   time.Time // zero: not seen idle
	ensures uint64
}

// DropIdle removes the pools that have had no instance and no configuration
// for longer than their forget_after, and returns their names. keep reports
// configuration kept outside the registry (a stored pool configuration or
// ramp); a pool it names, a pool with weights or a policy set, or a pool
// holding any instance (also one between Connect and its first report) is
// kept. A pool is dropped only if no Ensure returned it since the sweep that
// first saw it idle, so a caller that got it from Ensure and is about to
// connect an instance is never left holding a dropped pool. Safe for
// concurrent use; the server calls it from its sweep.
func (r *Registry) DropIdle(now time.Time, keep func(pool string) bool) []string {
	var out []string
	for _, p := range r.Pools() {
		if !p.markIdle(now, keep(p.name)) {
			continue
		}
		r.mu.Lock()
		p.mu.Lock()
		if r.pools[p.name] == p && p.idle.ensures == p.ensures.Load() && p.unused() {
			delete(r.pools, p.name)
			out = append(out, p.name)
		}
		p.mu.Unlock()
		r.mu.Unlock()
	}
	return out
}

// unused reports whether p has no instance and no configuration set.
// Call with p.mu held.
func (p *Pool) unused() bool {
	c := p.cfg.Load()
	return len(p.byID) == 0 && c.WeightsVersion == 0 && c.PolicyVersion == 0 && c.Weights == nil
}

// markIdle records whether p is idle at now (unused and not kept) and
// reports whether it has been idle, with no Ensure since, for longer than
// its forget_after.
func (p *Pool) markIdle(now time.Time, kept bool) bool {
	forget := p.cfg.Load().Policy.ForgetAfter
	p.mu.Lock()
	defer p.mu.Unlock()
	if kept || !p.unused() {
		p.idle = poolIdle{}
		return false
	}
	ens := p.ensures.Load()
	if p.idle.since.IsZero() || p.idle.ensures != ens {
		p.idle = poolIdle{since: now, ensures: ens}
		return false
	}
	return now.Sub(p.idle.since) > forget
}
