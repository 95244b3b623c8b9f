package state

import "github.com/prefixroute/prefixroute/scheduler"

// Concurrent picks and the optimistic accounting.
//
// Pick decides on a snapshot taken under the read lock and accounts the
// chosen instance's new work under the write lock. Two picks that overlap
// can therefore both decide on a snapshot without the other's work: a burst
// of requests picked at once by several gateway workers all see an idle
// instance, all go to it, and each is predicted as if it were alone there,
// which optimistic accounting exists to prevent. A pick that finds, at
// accounting time, that another pick was accounted onto its chosen (or
// prefill) instance since its snapshot decides again on a new snapshot with
// the same draws, as if it had come after: at most MaxPickRetries times,
// then it keeps its last decision. Picks that do not overlap on an
// instance never retry, so a serial caller (prefixsim) sees no change.

// MaxPickRetries is how many times a Pick decides again because another
// pick was accounted onto its chosen instance in the meantime.
const MaxPickRetries = 4

// testHookBeforeAccount, when set by a test, runs between a pick's decision
// and its accounting.
var testHookBeforeAccount func()

// stale reports whether another pick was accounted onto out's chosen
// instance, or its prefill instance, since out's snapshot. Called with
// p.mu held.
func (p *Pool) stale(out *Pick) bool {
	d := &out.Decision
	if out.recs[d.Instance].assignedAt > out.snapAssigns {
		return true
	}
	return d.PD.Disaggregated() && out.recs[d.PD.Prefill].assignedAt > out.snapAssigns
}

// Retries counts the picks of the pool decided again because of a
// concurrent pick (see MaxPickRetries). Safe for concurrent use.
func (p *Pool) Retries() uint64 { return p.retries.Load() }

// drawLog is a scheduler.RNG that records the draws of a pick's first
// attempt and replays them, in order, to a retry, then draws anew: a retry
// decides with the same random numbers a seeded pick would have used. Not
// safe for concurrent use (one Pick's scratch).
type drawLog struct {
	rng     scheduler.RNG
	draws   [8]float64
	n, next int
}

// start begins a pick's log over rng.
func (l *drawLog) start(rng scheduler.RNG) { l.rng, l.n, l.next = rng, 0, 0 }

// rewind makes the next draws replay the recorded ones.
func (l *drawLog) rewind() { l.next = 0 }

// Float64 returns the next recorded draw, or a new one (recorded while
// there is room).
func (l *drawLog) Float64() float64 {
	if l.next < l.n {
		l.next++
		return l.draws[l.next-1]
	}
	v := l.rng.Float64()
	if l.n < len(l.draws) && l.next == l.n {
		l.draws[l.n] = v
		l.n++
		l.next = l.n
	}
	return v
}
