package main

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/prefixroute/prefixroute/internal/sim"
	"github.com/prefixroute/prefixroute/internal/simout"
)

// pairStats compares a live run with its replay (the simulation with the
// live delays and draws) request by request, after the warm-up: of the
// requests served in both, how many went to the same instance, how many
// had a TTFT within compareTolerance of the live one, and, where the
// router predicted, the p90 prediction error live among the requests the
// replay placed alike and among the others. It tells a difference of
// paths (the router chose otherwise, because its view differed) from one
// of timing on the same path. A plain value.
type pairStats struct {
	Both, SameInstance, TTFTClose int
	// P90Same and P90Other are the live p90 |predicted − actual| /
	// actual, as fractions, of the predicted requests placed alike and
	// the others; NaN when there are none.
	P90Same, P90Other float64
}

// pairRuns pairs live's records with replayed's by request id.
func pairRuns(live, replayed *sim.Result) pairStats {
	rep := make(map[uint64]*sim.Record, len(replayed.Records))
	for i := range replayed.Records {
		rep[replayed.Records[i].ID] = &replayed.Records[i]
	}
	var ps pairStats
	var same, other []float64
	for i := range live.Records {
		l := &live.Records[i]
		r, ok := rep[l.ID]
		if !ok || l.Arrival < live.Warmup {
			continue
		}
		ps.Both++
		if math.Abs(float64(r.TTFT)/float64(max(l.TTFT, 1))-1) <= compareTolerance {
			ps.TTFTClose++
		}
		err, predicted := simout.PredictionError(l)
		if l.Instance == r.Instance {
			ps.SameInstance++
			if predicted {
				same = append(same, err)
			}
		} else if predicted {
			other = append(other, err)
		}
	}
	ps.P90Same, ps.P90Other = p90(same), p90(other)
	return ps
}

// p90 is the 0.9 quantile of xs (sorted in place), NaN when empty.
func p90(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	slices.Sort(xs)
	return sim.Percentile(xs, 0.9)
}

// writePairs appends the pairing table's row for variant v.
func writePairs(b *strings.Builder, v string, ps pairStats) {
	pct := func(n int) string {
		if ps.Both == 0 {
			return "—"
		}
		return fmt.Sprintf("%.1f %%", 100*float64(n)/float64(ps.Both))
	}
	errPct := func(x float64) string {
		if math.IsNaN(x) {
			return "—"
		}
		return fmt.Sprintf("%.1f %%", 100*x)
	}
	fmt.Fprintf(b, "| %s | %d | %s | %s | %s | %s |\n", v, ps.Both, pct(ps.SameInstance), pct(ps.TTFTClose),
		errPct(ps.P90Same), errPct(ps.P90Other))
}
