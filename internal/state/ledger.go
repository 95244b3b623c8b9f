package state

// LedgerPicks is how many of its latest picks the router remembers per
// instance (their predicted uncached tokens) for the queue ledger.
const LedgerPicks = 256

// ledger is the router's record of the prefill work it sent one instance:
// the predicted uncached tokens of its latest picks (its own and, through
// Assign, other replicas'), newest last, in a ring of LedgerPicks. Guarded
// by the pool's lock.
//
// A report's queue may count its waiting requests' whole prompts (an engine
// learns a request's cache hit only when it schedules it, and prefixagent
// reports waiting requests × mean prompt), which makes a cache holder look
// busier than it is. With FCFS, the requests an instance reports waiting or
// running are its latest picks, and the router knows what each of them will
// really prefill. So the queue the scheduler sees is the smaller of the
// report's and the ledger's: the predicted uncached tokens of the instance's
// latest waiting + running picks (see queueFrom). For a report that counts
// uncached tokens already the ledger is the larger (it counts the running
// picks whole), and the report stands.
type ledger struct {
	ring [LedgerPicks]uint32
	n    uint64 // picks recorded in all
}

// add records one pick's predicted uncached tokens.
func (l *ledger) add(tokens uint64) {
	l.ring[l.n%LedgerPicks] = uint32(min(tokens, 1<<32-1))
	l.n++
}

// last returns the summed tokens of the latest k picks, and false when the
// ledger does not hold k picks.
func (l *ledger) last(k uint64) (uint64, bool) {
	if k > l.n || k > LedgerPicks {
		return 0, false
	}
	var sum uint64
	for i := l.n - k; i < l.n; i++ {
		sum += uint64(l.ring[i%LedgerPicks])
	}
	return sum, true
}

// queueFrom returns the queue figures the scheduler uses for rep: the
// report's, capped by the ledger's estimate of its waiting and running
// picks (tokens, and at the report's throughput, or tps when it reports
// none, ms). A report with nothing waiting or running is left alone.
func (l *ledger) queueFrom(rep *Report, tps float64) (tokens uint64, ms float64) {
	tokens, ms = rep.QueuedPrefillTokens, rep.QueueMs
	k := uint64(rep.WaitingRequests) + uint64(rep.RunningRequests)
	if k == 0 {
		return tokens, ms
	}
	sum, ok := l.last(k)
	if !ok {
		return tokens, ms
	}
	tokens = min(tokens, sum)
	if rep.PrefillTokensPerSecond > 0 {
		tps = rep.PrefillTokensPerSecond
	}
	if rep.HasQueueMs && tps > 0 {
		ms = min(ms, float64(sum)*1000/tps)
	}
	return tokens, ms
}

// defaultTPS is the policy's default prefill throughput, 0 before a
// configuration is set. Called with p.mu held.
func (p *Pool) defaultTPS() float64 {
	if c := p.cfg.Load(); c != nil {
		return c.Policy.DefaultPrefillTokensPerSecond
	}
	return 0
}
