package scheduler

import (
	"math"
	"time"
)

// MaxBacklogWeight caps the utilisation term of BacklogWeight: 20, the
// model's 1/(1 − ρ) at ρ = 0.95. A holder then keeps a prefix until its
// queue is longer by 20 misses of it, not without bound.
const MaxBacklogWeight = 20

// UtilisationTau is the time constant of a pool's utilisation estimate: the
// rate of prefill tokens picked decays by e^(−age/UtilisationTau)
// (DecayedRate, AddedRate), and the measured busy share is averaged over it
// (BusyAverage). 2 s: a few report intervals of every instance, short
// against a load change a router should follow.
const UtilisationTau = 2 * time.Second

// Backlog is what BacklogWeight reads of a pool at one time: sums a state
// layer maintains over its connected, reported, not draining instances. A
// plain value.
type Backlog struct {
	// Found reports that some instance qualifies; with none, the weight is 0.
	Found bool
	// LeastWaiting is the fewest waiting requests any of them reports.
	LeastWaiting uint32
	// PickedTokensPerSecond is the rate of prefill tokens picked onto the
	// pool, decaying over UtilisationTau (AddedRate, DecayedRate).
	PickedTokensPerSecond float64
	// ThroughputTokensPerSecond is their summed prefill throughput (the
	// policy's default for an instance that reports none).
	ThroughputTokensPerSecond float64
	// Busy is the share of them whose latest report shows prefill work
	// queued or running (ReportsBusy), averaged over UtilisationTau
	// (BusyAverage): the pool's measured prefill utilisation.
	Busy float64
}

// Utilisation is the pool's prefill utilisation ρ as b estimates it: the
// larger of the tokens picked per second of throughput and the measured
// busy share. The busy share also counts the engine time the tokens do not
// (a fixed cost per batch: at 70 % busy in SIMULATION.md's util70 the
// tokens alone make ρ about 0.55). Pure; safe for concurrent use.
func Utilisation(b Backlog) float64 {
	rho := 0.0
	if b.ThroughputTokensPerSecond > 0 {
		rho = b.PickedTokensPerSecond / b.ThroughputTokensPerSecond
	}
	return max(rho, b.Busy)
}

// BacklogWeight is the Request.PrefillWeight of a pick on a pool that b
// describes: 0 (the model's cost) when no instance qualifies, else the
// larger of 1 + b.LeastWaiting and UtilWeight(Utilisation(b)).
//
// The work a miss adds to an instance delays the requests that queue
// behind it before that instance next idles, not this request alone: in a
// single queue with utilisation ρ, about ρ/(1 − ρ) requests' worth, and
// when every instance has requests waiting, about as many as wait now
// (Little's law). A least-workload cost that counts only the request's own
// wait spreads a prefix to a cold instance whenever the holder's queue is
// longer by a full miss, which is often at high load; the misses add work
// everywhere and the backlog feeds itself (issue 20, util70 in
// SIMULATION.md). Weighing the prefill term keeps the cost close to the
// model's at low load and favours hits as the pool fills. Pure; safe for
// concurrent use.
func BacklogWeight(b Backlog) float64 {
	if !b.Found {
		return 0
	}
	return max(1+float64(b.LeastWaiting), UtilWeight(Utilisation(b)))
}

// UtilWeight is the utilisation term of BacklogWeight at utilisation rho:
// 1 + ρ/(1 − ρ)², at most MaxBacklogWeight (and MaxBacklogWeight at ρ ≥ 1;
// a negative ρ counts as 0). It is the request's own work plus the waiting
// one unit of work adds to everyone after it in an M/M/1 queue of
// utilisation ρ (the derivative of the queue's summed sojourn times with
// respect to its load, less the newcomer's own: Naor 1969, Mendelson
// 1985). 1/(1 − ρ) = 1 + ρ/(1 − ρ) would count the requests a unit of work
// delays as those in the queue now; but the work also lengthens the busy
// period, and so delays the requests that arrive during it, and those that
// arrive during their delay. Pure; safe for concurrent use.
func UtilWeight(rho float64) float64 {
	if !(rho < 1) { // NaN too
		return MaxBacklogWeight
	}
	rho = max(rho, 0)
	return min(1+rho/((1-rho)*(1-rho)), MaxBacklogWeight)
}

// decayFactor is e^(−dt/UtilisationTau); 1 for dt ≤ 0.
func decayFactor(dt time.Duration) float64 {
	if dt <= 0 {
		return 1
	}
	return math.Exp(-float64(dt) / float64(UtilisationTau))
}

// DecayedRate is an exponentially decaying rate, rate at a time, read dt
// later: rate × e^(−dt/UtilisationTau); rate itself for dt ≤ 0 (a reading
// dated before the rate's time). Pure; safe for concurrent use.
func DecayedRate(rate float64, dt time.Duration) float64 { return rate * decayFactor(dt) }

// AddedRate is the decaying rate of tokens (the rate was rate dt ago) after
// tokens more are picked now: DecayedRate(rate, dt) + tokens/UtilisationTau,
// so that a pick of n tokens adds n × e^(−age/UtilisationTau)/UtilisationTau
// to every later reading. Pure; safe for concurrent use.
func AddedRate(rate float64, dt time.Duration, tokens uint64) float64 {
	return DecayedRate(rate, dt) + float64(tokens)/UtilisationTau.Seconds()
}

// BusyAverage is the busy share averaged in time: an exponential moving
// average that moves from prev towards the share sampled now, a reading dt
// after prev's, by 1 − e^(−dt/UtilisationTau). A sample dated at or before
// prev's (a concurrent pick's earlier time) weighs nothing. Pure; safe for
// concurrent use.
func BusyAverage(prev, sample float64, dt time.Duration) float64 {
	return prev + (sample-prev)*(1-decayFactor(dt))
}

// ReportsBusy reports whether an instance's latest report shows prefill
// work queued or running: its queue_ms when it reports one (hasQueueMs; the
// protocol's "queued and running prefill work"), else its queued prefill
// tokens. Sampled over the instances and over time it is the prefill
// engines' busy fraction, which counts what the router's rate of picked
// tokens cannot see: time per batch beyond the tokens (scheduling, kernel
// launches) and a throughput below the reported one. Pure; safe for
// concurrent use.
func ReportsBusy(queueMs float64, hasQueueMs bool, queuedTokens uint64) bool {
	if hasQueueMs {
		return queueMs > 0
	}
	return queuedTokens > 0
}
