package state

import (
	"time"

	"github.com/prefixroute/prefixroute/scheduler"
)

// backlogWeight is the scheduler.Request.PrefillWeight of a pick at now:
// scheduler.BacklogWeight of the pool's backlog sums (backlogSums) and the
// rates of prefill work and picks onto it (p.work). Called with p.mu held.
func (p *Pool) backlogWeight(now time.Time) float64 {
	return scheduler.BacklogWeight(p.backlog(now))
}

// backlog is the scheduler.Backlog of the pool at now. Called with p.mu
// held.
func (p *Pool) backlog(now time.Time) scheduler.Backlog {
	b := p.backlogSums(now)
	work, picks := p.work.read(now)
	return scheduler.Backlog{
		Found: b.found, LeastWaiting: b.least, Instances: b.n, PickedTokensPerSecond: work, PicksPerSecond: picks,
		ThroughputTokensPerSecond: b.tps, QueueMs: b.queueMs,
	}
}

// backlogRefresh is how long backlogWeight reuses its reading of the
// instances (the fewest waiting requests, the summed throughput, the mean
// queue): 10 ms, well within a report interval (50–100 ms), so that a pick
// does not walk all the instances of a large pool
// (BenchmarkPickScale).
const backlogRefresh = 10 * time.Millisecond

// backlogSums is backlogWeight's reading of the connected, reported, not
// draining instances at a time. Immutable once published in Pool.bsums.
type backlogSums struct {
	at    time.Time
	least uint32  // the fewest waiting requests
	found bool    // some instance qualifies
	n     int     // how many qualify
	tps   float64 // their summed prefill throughput, tokens/s
	// queueMs is their mean queue as the scheduler sees it (the report
	// capped by the ledger; scheduler.ReportedQueueMs), averaged in time
	// (scheduler.TimeAverage).
	queueMs float64
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
	queue := 0.0
	for _, in := range p.order {
		if !in.connected || !in.reported || in.last.Draining {
			continue
		}
		b.n++
		tps := in.last.PrefillTokensPerSecond
		if tps <= 0 {
			tps = def
		}
		b.tps += tps
		si := &p.tmpl[in.ord] // the report's queue capped by the ledger (syncReport)
		queue += scheduler.ReportedQueueMs(si.QueueMs, si.HasQueueMs, si.QueuedPrefillTokens, tps)
		if w := in.last.WaitingRequests; !b.found || w < b.least {
			b.least, b.found = w, true
		}
	}
	if b.n > 0 {
		b.queueMs = queue / float64(b.n)
		if c := p.bsums.Load(); c != nil && c.found {
			b.queueMs = scheduler.TimeAverage(c.queueMs, b.queueMs, now.Sub(c.at))
		}
	}
	p.bsums.Store(&b)
	return b
}

// workMeter is the rate of prefill work (work tokens) and of picks onto a
// pool's instances, decaying over scheduler.UtilisationTau
// (scheduler.AddedRate), and the time of its latest pick.
type workMeter struct {
	rate  float64 // work tokens/s at at
	picks float64 // picks/s at at
	at    time.Time
}

// add records one pick of tokens of work at now.
func (m *workMeter) add(now time.Time, tokens uint64) {
	dt := now.Sub(m.at)
	m.rate = scheduler.AddedRate(m.rate, dt, tokens)
	m.picks = scheduler.AddedRate(m.picks, dt, 1)
	if now.After(m.at) {
		m.at = now
	}
}

// read is the rates at now, work tokens/s and picks/s: 0 before the first
// pick.
func (m *workMeter) read(now time.Time) (work, picks float64) {
	if m.at.IsZero() {
		return 0, 0
	}
	dt := now.Sub(m.at)
	return scheduler.DecayedRate(m.rate, dt), scheduler.DecayedRate(m.picks, dt)
}
