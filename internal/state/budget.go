package state

import "sync/atomic"

// pairBudget is the registry-wide cap on prefix-index (block, instance)
// pairs, the global bound on the index's memory. Safe for concurrent use:
// each Pool adds its own changes under its own lock.
type pairBudget struct {
	max     int64 // Limits.MaxIndexPairs
	used    atomic.Int64
	evicted atomic.Int64
}

// settle brings the budget up to date with the pool's index after a change
// and, while the router holds more than MaxIndexPairs pairs, evicts the
// least recently used blocks of this pool's largest instance: the pool that
// adds past the cap pays for it, and its largest cache shrinks first.
// Called with p.mu held, at the end of every operation that can add pairs.
func (p *Pool) settle() {
	b := p.budget
	over := b.used.Add(int64(p.index.pairs-p.counted)) - b.max
	p.counted = p.index.pairs
	for over > 0 {
		var big *instance
		for _, in := range p.order {
			if big == nil || in.cache.Len() > big.cache.Len() {
				big = in
			}
		}
		if big == nil || big.cache.Len() == 0 {
			return // nothing of this pool's left to give
		}
		for n := min(over, int64(big.cache.Len())); n > 0; n-- {
			h, _ := big.cache.evictOldest()
			p.index.remove(h, big.slot)
			b.evicted.Add(1)
		}
		over = b.used.Add(int64(p.index.pairs-p.counted)) - b.max
		p.counted = p.index.pairs
	}
}

// IndexPairs returns the (block, instance) pairs the router holds in all
// pools, and how many the global cap (Limits.MaxIndexPairs) has evicted.
func (r *Registry) IndexPairs() (held, evicted int64) {
	return r.budget.used.Load(), r.budget.evicted.Load()
}
