package state

import (
	"time"

	"github.com/prefixroute/prefixroute/scheduler"
)

// backlogWeight is the scheduler.Request.PrefillWeight of a pick at now:
// scheduler.BacklogWeight of the pool's backlog sums (backlogSums) and the
// rate of prefill tokens picked onto it (p.work). Called with p.mu held.
func (p *Pool) backlogWeight(now time.Time) float64 {
	b := p.backlogSums(now)
	return scheduler.BacklogWeight(scheduler.Backlog{
		Found: b.found, LeastWaiting: b.least, PickedTokensPerSecond: p.work.read(now),
		ThroughputTokensPerSecond: b.tps, Busy: b.busy,
	})
}

// backlogRefresh is how long backlogWeight reuses its reading of the
// instances (the fewest waiting requests, the summed throughput, the busy
// share): 10 ms, well within a report interval (50–100 ms), so that a pick
// does not walk all the instances of a large pool
// (BenchmarkPickScale).
const backlogRefresh = 10 * time.Millisecond

// backlogSums is backlogWeight's reading of the connected, reported, not
// draining instances at a time. Immutable once published in Pool.bsums.
type backlogSums struct {
	at    time.Time
	least uint32  // the fewest waiting requests
	found bool    // some instance qualifies
	tps   float64 // their summed prefill throughput, tokens/s
	// busy is the share of them whose latest report shows prefill work
	// (scheduler.ReportsBusy), averaged in time (scheduler.BusyAverage).
	busy float64
}

// backlogSums returns the reading of the instances at most backlogRefresh
// old at now, reading them again (and publishing it for the picks after)
// when it is older or from a later time. Called with p.mu held (read or
// write); concurrent calls may read the instances twice, never a torn
// reading.
func (p *Pool) backlogSums(now time.Time) backlogSums {
	if c := p.bsums.Load(); c != nil {
		if age := now.Sub(c.at); age >= 0 && age < backlogRefresh {
			return *c
		}
	}
	b := backlogSums{at: now}
	def := p.defaultTPS()
	n, busy := 0, 0
	for _, in := range p.order {
		if !in.connected || !in.reported || in.last.Draining {
			continue
		}
		n++
		if l := &in.last; scheduler.ReportsBusy(l.QueueMs, l.HasQueueMs, l.QueuedPrefillTokens) {
			busy++
		}
		if t := in.last.PrefillTokensPerSecond; t > 0 {
			b.tps += t
		} else {
			b.tps += def
		}
		if w := in.last.WaitingRequests; !b.found || w < b.least {
			b.least, b.found = w, true
		}
	}
	if n > 0 {
		b.busy = float64(busy) / float64(n)
		if c := p.bsums.Load(); c != nil && c.found {
			b.busy = scheduler.BusyAverage(c.busy, b.busy, now.Sub(c.at))
		}
	}
	p.bsums.Store(&b)
	return b
}

// workMeter is the rate of prefill tokens picked onto a pool's instances,
// decaying over scheduler.UtilisationTau (scheduler.AddedRate), and the
// time of its latest pick.
type workMeter struct {
	rate float64 // tokens/s at at
	at   time.Time
}

// add records tokens picked at now.
func (m *workMeter) add(now time.Time, tokens uint64) {
	m.rate = scheduler.AddedRate(m.rate, now.Sub(m.at), tokens)
	if now.After(m.at) {
		m.at = now
	}
}

// read is the rate at now, tokens/s: 0 before the first pick.
func (m *workMeter) read(now time.Time) float64 {
	if m.at.IsZero() {
		return 0
	}
	return scheduler.DecayedRate(m.rate, now.Sub(m.at))
}
