package sim

import (
	"slices"
	"time"
)

// ClassStats is what one workload class got in a window of a run (flow
// control comparisons, docs/flow-control.md). A plain value.
type ClassStats struct {
	Class string
	// Served and Rejected count the class's requests that arrived in the
	// window.
	Served, Rejected int
	// TTFT p50 and p99 of the served ones (arrival to first token, the
	// router's wait included), and the p99 of the wait in the router.
	TTFTp50, TTFTp99, RouterWaitP99 time.Duration
	// DispatchedTokens is the prompt tokens of the class's requests placed
	// on an instance in the window (by the time they were placed).
	DispatchedTokens uint64
}

// ClassWindow returns each class's ClassStats over arrivals (and, for
// DispatchedTokens, placements) in [from, to).
func ClassWindow(res *Result, from, to time.Duration) []ClassStats {
	out := make([]ClassStats, len(res.Classes))
	ttft := make([][]float64, len(res.Classes))
	wait := make([][]float64, len(res.Classes))
	for i, c := range res.Classes {
		out[i].Class = c
	}
	for i := range res.Records {
		r := &res.Records[i]
		if placed := r.Arrival + r.Routed; placed >= from && placed < to {
			out[r.Class].DispatchedTokens += uint64(r.Prompt)
		}
		if r.Arrival < from || r.Arrival >= to {
			continue
		}
		out[r.Class].Served++
		ttft[r.Class] = append(ttft[r.Class], float64(r.TTFT))
		wait[r.Class] = append(wait[r.Class], float64(r.Routed))
	}
	for i := range res.Rejected {
		if r := &res.Rejected[i]; r.Arrival >= from && r.Arrival < to {
			out[r.Class].Rejected++
		}
	}
	for i := range out {
		slices.Sort(ttft[i])
		slices.Sort(wait[i])
		if len(ttft[i]) > 0 {
			out[i].TTFTp50 = time.Duration(percentile(ttft[i], 0.5))
			out[i].TTFTp99 = time.Duration(percentile(ttft[i], 0.99))
			out[i].RouterWaitP99 = time.Duration(percentile(wait[i], 0.99))
		}
	}
	return out
}
