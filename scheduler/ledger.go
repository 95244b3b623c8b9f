package scheduler

// LedgerPicks is how many of its latest picks a router remembers per
// instance (their predicted prefill work, WorkTokens) for the queue ledger: 256,
// more than an engine's batch and queue hold at once in practice.
const LedgerPicks = 256

// ReportedQueue is an instance's queue as its latest report states it. A
// plain value.
type ReportedQueue struct {
	// Waiting and Running are the requests it reports waiting and running.
	Waiting, Running uint32
	// Tokens and Ms are its queued prefill tokens and queue_ms (HasMs: the
	// report has queue_ms).
	Tokens uint64
	Ms     float64
	HasMs  bool
	// TokensPerSecond is its reported prefill throughput, 0 if none.
	TokensPerSecond float64
}

// LedgerDepth is how many of the instance's latest picks the ledger sums
// to estimate q's queue: its waiting + running requests (with FCFS they are
// its latest picks). 0: the report shows none, and stands.
func LedgerDepth(q ReportedQueue) uint64 { return uint64(q.Waiting) + uint64(q.Running) }

// LedgerQueue returns the queue the scheduler sees for q: the report's
// figures capped by the ledger's, picked being the summed predicted
// prefill work (WorkTokens, with the attention term of PrefillWork) of the
// instance's latest LedgerDepth(q) picks (tokens,
// and at q's throughput, or defaultTPS when it reports none, ms). A report
// with nothing waiting or running, or whose picks the ledger does not hold
// (known false), stands.
//
// A report's queue may count its waiting requests' whole prompts (an
// engine learns a request's cache hit only when it schedules it, and
// prefixagent reports waiting requests × mean prompt), which makes a cache
// holder look busier than it is; the router knows what each of its picks
// will really prefill. For a report that counts uncached tokens already the
// ledger is the larger (it counts the running picks whole), and the report
// stands. Pure; safe for concurrent use.
func LedgerQueue(q ReportedQueue, picked uint64, known bool, defaultTPS float64) (tokens uint64, ms float64) {
	tokens, ms = q.Tokens, q.Ms
	if LedgerDepth(q) == 0 || !known {
		return tokens, ms
	}
	tokens = min(tokens, picked)
	tps := defaultTPS
	if q.TokensPerSecond > 0 {
		tps = q.TokensPerSecond
	}
	if q.HasMs && tps > 0 {
		ms = min(ms, float64(picked)*1000/tps)
	}
	return tokens, ms
}
