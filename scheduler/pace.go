package scheduler

import "time"

// Dispatch spacing keeps the requests a router sends to one instance in the
// order it picked them. A gateway forwards each request a few jittered
// milliseconds after its pick returns, so two requests picked for one
// instance within that jitter reach its FCFS queue in either order. The
// router prices each pick with the earlier ones already queued ahead of it
// (optimistic accounting); swapped, a short request predicted behind a long
// one goes first and the long one waits for it, and both predictions miss
// by the other's prefill. With Policy.DispatchSpacingMs set, the router
// answers a pick for an instance no sooner than that long after it answered
// the previous pick for it (DispatchHold), so the earlier request has that
// long to reach the queue first.

// DispatchHold returns how long a router holds its answer to a pick for an
// instance: until spacing after it answered the previous pick for that
// instance (lastAnswer, at or after now when that pick is still held; the
// zero time when there was none), and 0 when that moment has passed. The
// hold never exceeds aheadMs, the queue the pick was priced behind (the
// instance's QueueMs, which counts the earlier picks): a request that would
// find its instance idle is not delayed, and one that queues behind the
// earlier pick waits at the router instead of at the instance, which leaves
// its predicted TTFT unchanged. now and lastAnswer come from one clock.
// Pure; safe for concurrent use.
func DispatchHold(now, lastAnswer time.Time, spacing time.Duration, aheadMs float64) time.Duration {
	if spacing <= 0 || lastAnswer.IsZero() || !(aheadMs > 0) {
		return 0
	}
	hold := lastAnswer.Add(spacing).Sub(now)
	if hold <= 0 {
		return 0
	}
	if ahead := time.Duration(aheadMs * float64(time.Millisecond)); hold > ahead {
		hold = ahead
	}
	return hold
}
