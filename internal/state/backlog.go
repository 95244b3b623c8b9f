package state

import (
	"math"
	"time"
)

// maxBacklogRho caps the utilisation backlogWeight uses: weight <= 20.
const maxBacklogRho = 0.95

// backlogWeight is the scheduler.Request.PrefillWeight of a pick when
// Limits.BacklogWeight is on, the larger of
//
//	1 + the fewest waiting requests any instance has, and
//	1 / (1 − ρ), ρ = the prefill tokens/s picked onto the pool (decaying
//	over workTau) / the summed throughput, at most maxBacklogRho,
//
// over the connected, reported, not draining instances; 0 (the model's
// cost) when it is off or no instance qualifies.
//
// The work a miss adds to an instance delays the requests that queue
// behind it before that instance next idles, not this request alone: in a
// single queue with utilisation ρ, about ρ/(1 − ρ) requests' worth, and when
// every instance has requests waiting, about as many as wait now (Little's
// law). A least-workload cost that counts only the request's own wait
// spreads a prefix to a cold instance whenever the holder's queue is longer
// by a full miss, which is often at high load; the misses add work
// everywhere and the backlog feeds itself (issue 20, util70 in
// SIMULATION.md). Weighing the prefill term keeps the cost close to the
// model's at low load and favours hits as the pool fills. Called with p.mu
// held.
func (p *Pool) backlogWeight(now time.Time) float64 {
	if !p.limits.BacklogWeight {
		return 0
	}
	b := p.backlogSums(now)
	if !b.found {
		return 0
	}
	w := 1 + float64(b.least)
	if b.tps > 0 {
		rho := min(p.work.read(now)/b.tps, maxBacklogRho)
		w = max(w, 1/(1-rho))
	}
	return w
}

// backlogRefresh is how long backlogWeight reuses its reading of the
// instances (the fewest waiting requests, the summed throughput): 10 ms,
// well within a report interval (50–100 ms), so that a pick does not walk
// all 10,000 instances of a large pool (BenchmarkPickScaleBacklog).
const backlogRefresh = 10 * time.Millisecond

// backlogSums is backlogWeight's reading of the connected, reported, not
// draining instances at a time. Immutable once published in Pool.bsums.
type backlogSums struct {
	at    time.Time
	least uint32  // the fewest waiting requests
	found bool    // some instance qualifies
	tps   float64 // their summed prefill throughput, tokens/s
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
	for _, in := range p.order {
		if !in.connected || !in.reported || in.last.Draining {
			continue
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
	p.bsums.Store(&b)
	return b
}

// workTau is the time constant of the pool's work meter.
const workTau = 2 * time.Second

// workMeter is an exponentially decaying rate of the prefill tokens picked
// onto a pool's instances: sum of tokens × e^(-age/workTau) / workTau.
type workMeter struct {
	rate float64 // tokens/s at at
	at   time.Time
}

func (m *workMeter) decay(now time.Time) float64 {
	if m.at.IsZero() {
		return 0
	}
	dt := now.Sub(m.at)
	if dt <= 0 {
		return m.rate
	}
	return m.rate * math.Exp(-float64(dt)/float64(workTau))
}

// add records tokens picked at now.
func (m *workMeter) add(now time.Time, tokens uint64) {
	m.rate = m.decay(now) + float64(tokens)/workTau.Seconds()
	if now.After(m.at) {
		m.at = now
	}
}

// read is the rate at now, tokens/s.
func (m *workMeter) read(now time.Time) float64 { return m.decay(now) }
