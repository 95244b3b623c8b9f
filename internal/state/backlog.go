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
	least, found := uint32(0), false
	tps := 0.0
	def := p.defaultTPS()
	for _, in := range p.order {
		if !in.connected || !in.reported || in.last.Draining {
			continue
		}
		if t := in.last.PrefillTokensPerSecond; t > 0 {
			tps += t
		} else {
			tps += def
		}
		if w := in.last.WaitingRequests; !found || w < least {
			least, found = w, true
		}
	}
	if !found {
		return 0
	}
	w := 1 + float64(least)
	if tps > 0 {
		rho := min(p.work.read(now)/tps, maxBacklogRho)
		w = max(w, 1/(1-rho))
	}
	return w
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
