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
// rates of prefill work and of picks decay by e^(−age/UtilisationTau)
// (DecayedRate, AddedRate), and the reported queues are averaged over it
// (TimeAverage). 2 s: a few report intervals of every instance, short
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
	// Instances is how many qualify.
	Instances int
	// PickedTokensPerSecond is the rate of prefill work picked onto the
	// pool, in work tokens (WorkTokens) per second, and PicksPerSecond the
	// rate of picks, both decaying over UtilisationTau (AddedRate,
	// DecayedRate).
	PickedTokensPerSecond float64
	PicksPerSecond        float64
	// ThroughputTokensPerSecond is their summed prefill throughput (the
	// policy's default for an instance that reports none).
	ThroughputTokensPerSecond float64
	// QueueMs is their mean reported queue (ReportedQueueMs), averaged over
	// UtilisationTau (TimeAverage): the pool's measured unfinished prefill
	// work per instance.
	QueueMs float64
}

// ServiceMs is the mean prefill time of a pick on b's pool, in ms: the
// mean work of a pick (PickedTokensPerSecond / PicksPerSecond) at the mean
// instance's throughput. 0 when no pick is in the rates or the pool has no
// throughput. Pure; safe for concurrent use.
func ServiceMs(b Backlog) float64 {
	if !(b.PicksPerSecond > 0) || !(b.ThroughputTokensPerSecond > 0) || b.Instances <= 0 {
		return 0
	}
	return b.PickedTokensPerSecond / b.PicksPerSecond * 1000 * float64(b.Instances) / b.ThroughputTokensPerSecond
}

// Utilisation is the pool's prefill utilisation ρ as b estimates it, the
// larger of two readings:
//
//	ρ_rate  = PickedTokensPerSecond / ThroughputTokensPerSecond
//	ρ_queue = QueueMs / (QueueMs + ServiceMs(b))   (0 when ServiceMs is 0)
//
// ρ_rate is the work the router sends over what the instances can do.
// ρ_queue reads the reports: in a queue of utilisation ρ and mean service
// time S the mean unfinished work is V = ρ·S/(1 − ρ) (M/M/1), so ρ =
// V/(V + S). It counts what the rate cannot see (time per batch beyond
// the tokens, a throughput below the reported one, work other routers
// send), and it stays small when the queues are short against a request's
// own prefill: three instances reporting 5–60 ms of queue (mean 32 ms)
// under picks of 200 ms give ρ 0.14, where counting every instance with
// some queue as busy (before issue 29) gave ρ 1 and the cap. Pure; safe
// for concurrent use.
func Utilisation(b Backlog) float64 {
	rho := 0.0
	if b.ThroughputTokensPerSecond > 0 {
		rho = b.PickedTokensPerSecond / b.ThroughputTokensPerSecond
	}
	if s := ServiceMs(b); s > 0 && b.QueueMs > 0 {
		rho = max(rho, b.QueueMs/(b.QueueMs+s))
	}
	return rho
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

// TimeAverage is an exponential moving average in time: it moves from prev
// towards the value sampled now, a reading dt after prev's, by
// 1 − e^(−dt/UtilisationTau). A sample dated at or before prev's (a
// concurrent pick's earlier time) weighs nothing. Pure; safe for
// concurrent use.
func TimeAverage(prev, sample float64, dt time.Duration) float64 {
	return prev + (sample-prev)*(1-decayFactor(dt))
}

// ReportedQueueMs is an instance's queue as its report states it, in ms:
// its queue_ms when it reports one (hasQueueMs; the protocol's "queued and
// running prefill work"), else its queued prefill tokens at tps tokens/s
// (0 when tps is not positive). Pure; safe for concurrent use.
func ReportedQueueMs(queueMs float64, hasQueueMs bool, queuedTokens uint64, tps float64) float64 {
	if hasQueueMs {
		return queueMs
	}
	if !(tps > 0) {
		return 0
	}
	return float64(queuedTokens) * 1000 / tps
}
