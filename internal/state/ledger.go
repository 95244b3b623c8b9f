package state

import "github.com/prefixroute/prefixroute/scheduler"

// ledger is the router's record of the prefill work it sent one instance:
// the predicted prefill work (scheduler.WorkTokens) of its latest picks (its own and, through
// Assign, other replicas'), newest last, in a ring of
// scheduler.LedgerPicks. Guarded by the pool's lock. The queue the
// scheduler sees is scheduler.LedgerQueue of the report and the ledger's
// sum (queueFrom).
type ledger struct {
	ring [scheduler.LedgerPicks]uint32
	n    uint64 // picks recorded in all
}

// add records one pick's predicted prefill work, in work tokens.
func (l *ledger) add(tokens uint64) {
	l.ring[l.n%scheduler.LedgerPicks] = uint32(min(tokens, 1<<32-1))
	l.n++
}

// last returns the summed tokens of the latest k picks, and false when the
// ledger does not hold k picks.
func (l *ledger) last(k uint64) (uint64, bool) {
	if k > l.n || k > scheduler.LedgerPicks {
		return 0, false
	}
	var sum uint64
	for i := l.n - k; i < l.n; i++ {
		sum += uint64(l.ring[i%scheduler.LedgerPicks])
	}
	return sum, true
}

// queueFrom returns the queue figures the scheduler uses for rep:
// scheduler.LedgerQueue of the report and the ledger's sum of the picks it
// reports waiting or running, tps the policy's default throughput.
func (l *ledger) queueFrom(rep *Report, tps float64) (tokens uint64, ms float64) {
	q := scheduler.ReportedQueue{Waiting: rep.WaitingRequests, Running: rep.RunningRequests,
		Tokens: rep.QueuedPrefillTokens, Ms: rep.QueueMs, HasMs: rep.HasQueueMs, TokensPerSecond: rep.PrefillTokensPerSecond}
	var sum uint64
	known := false
	if k := scheduler.LedgerDepth(q); k > 0 {
		sum, known = l.last(k)
	}
	return scheduler.LedgerQueue(q, sum, known, tps)
}

// defaultTPS is the policy's default prefill throughput, 0 before a
// configuration is set. Called with p.mu held.
func (p *Pool) defaultTPS() float64 {
	if c := p.cfg.Load(); c != nil {
		return c.Policy.DefaultPrefillTokensPerSecond
	}
	return 0
}
