package state

import (
	"math"
	"time"
)

// maxBacklogWeight caps the utilisation term of backlogWeight: 20, the
// model's 1/(1 − ρ) at ρ = 0.95. A holder then keeps a prefix until its
// queue is longer by 20 misses of it, not without bound.
const maxBacklogWeight = 20

// backlogWeight is the scheduler.Request.PrefillWeight of a pick when
// Limits.BacklogWeight is on, the larger of
//
//	1 + the fewest waiting requests any instance has, and
//	1 / (1 − ρ), ρ = the prefill tokens/s picked onto the pool (decaying
//	over workTau) / the summed throughput,
//
// over the connected, reported, not draining instances; 0 (the model's
// cost) when it is off or no instance qualifies; with
// Limits.BacklogExternality the second is 1 + ρ/(1 − ρ)² (see utilWeight),
// both at most maxBacklogWeight. With Limits.BacklogBusy,
// ρ is the larger of that and the measured busy fraction (backlogSums.busy:
// the share of instances whose latest report shows prefill work, averaged
// over workTau), which also counts the engine time the tokens do not
// (a fixed cost per batch: at 70 % busy in SIMULATION.md's util70 the
// tokens alone make ρ about 0.55).
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
	rho := 0.0
	if b.tps > 0 {
		rho = p.work.read(now) / b.tps
	}
	if p.limits.BacklogBusy {
		rho = max(rho, b.busy)
	}
	return max(1+float64(b.least), utilWeight(rho, p.limits.BacklogExternality))
}

// utilWeight is the utilisation term of backlogWeight at utilisation rho,
// at most maxBacklogWeight: 1/(1 − ρ), or with externality 1 + ρ/(1 − ρ)²,
// the request's own work plus the waiting one unit of work adds to
// everyone after it in an M/M/1 queue of utilisation ρ (the derivative of
// the queue's summed sojourn times with respect to its load, less the
// newcomer's own: Naor 1969, Mendelson 1985). 1/(1 − ρ) = 1 + ρ/(1 − ρ)
// counts the requests a unit of work delays as those in the queue now;
// but the work also lengthens the busy period, and so delays the requests
// that arrive during it, and those that arrive during their delay.
func utilWeight(rho float64, externality bool) float64 {
	if rho >= 1 {
		return maxBacklogWeight
	}
	rho = max(rho, 0)
	if externality {
		return min(1+rho/((1-rho)*(1-rho)), maxBacklogWeight)
	}
	return min(1/(1-rho), maxBacklogWeight)
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
	// busy is the fraction of them whose latest report shows prefill work
	// (reportsBusy), averaged over time with the work meter's time
	// constant: the pool's measured prefill utilisation.
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
		if reportsBusy(&in.last) {
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
			// An exponential moving average in time: a reading dt after the
			// previous one weighs 1 − e^(−dt/workTau); one dated before it
			// (a concurrent pick's earlier now) weighs nothing.
			dt := max(0, now.Sub(c.at))
			b.busy = c.busy + (b.busy-c.busy)*(1-math.Exp(-float64(dt)/float64(workTau)))
		}
	}
	p.bsums.Store(&b)
	return b
}

// reportsBusy reports whether r shows prefill work queued or running: its
// QueueMs when it has one (the protocol's "queued and running prefill
// work"), else its QueuedPrefillTokens. Sampled over the instances and over
// time it is the prefill engines' busy fraction, which counts what the
// router's work meter cannot see: time per batch beyond the tokens
// (scheduling, kernel launches) and a throughput below the reported one.
func reportsBusy(r *Report) bool {
	if r.HasQueueMs {
		return r.QueueMs > 0
	}
	return r.QueuedPrefillTokens > 0
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
