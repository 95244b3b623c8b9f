package main

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/prefixroute/prefixroute/internal/sim"
	"github.com/prefixroute/prefixroute/internal/simout"
)

// compareTolerance is the relative difference a simulated figure may have
// from the live one before the comparison marks it.
const compareTolerance = 0.10

// compareRuns simulates each variant a live run played, in virtual time on
// the same traffic (seed, virtual duration), twice: as prefixsim run does,
// and with the live run's arrival-to-queued delays and Pick draws
// replayed (prefixsim run --route-delays). It returns the Markdown tables
// of live against simulated: TTFT p50 and p99, hit ratio and max instance
// share, and, when a variant has predictions or targets, the router's
// prediction error and the target attainment (simout.Prediction); each
// simulated figure with its relative difference from the live one, marked
// "!" past compareTolerance; and, request by request, how many the replay
// placed and timed as the live run did (pairRuns).
func compareRuns(sc *sim.Scenario, live []*sim.Result, seed uint64) (string, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "Live against simulated (same seed and virtual duration; \"!\": more than %.0f %% apart):\n\n", 100*compareTolerance)
	b.WriteString("| variant | run | TTFT p50 ms | TTFT p99 ms | hit ratio | max instance share |\n|---|---|---:|---:|---:|---:|\n")
	var pred, pairs strings.Builder
	for _, l := range live {
		plain, err := sim.Run(sc, l.Variant.Name, sim.RunOptions{Seed: seed, Duration: l.Duration})
		if err != nil {
			return "", err
		}
		replayed, err := sim.Run(sc, l.Variant.Name, sim.RunOptions{Seed: seed, Duration: l.Duration, RouteDelays: routeDelays(l), LiveDraws: true})
		if err != nil {
			return "", err
		}
		writePairs(&pairs, l.Variant.Name, pairRuns(l, replayed))
		ls := simout.Summarise(l)
		hasPred := ls.Prediction.N > 0 || ls.Prediction.WithTarget > 0 || ls.Prediction.Shed > 0
		if hasPred {
			p := predictionRow(&ls.Prediction)
			fmt.Fprintf(&pred, "| %s | live | %.1f %% | %.1f %% | %.2f | %s | %.0f |\n", l.Variant.Name, p[0], p[1], p[2],
				attainment(&ls.Prediction, p[3], 0), p[4])
		}
		fmt.Fprintf(&b, "| %s | live | %.1f | %.1f | %.3f | %.3f |\n", l.Variant.Name, ls.TTFTP50, ls.TTFTP99, ls.HitRatio, ls.MaxInstanceShare)
		for _, run := range []struct {
			name string
			res  *sim.Result
		}{{"simulated", plain}, {"simulated, live delays and draws replayed", replayed}} {
			s := simout.Summarise(run.res)
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", l.Variant.Name, run.name, versus(s.TTFTP50, ls.TTFTP50, "%.1f"),
				versus(s.TTFTP99, ls.TTFTP99, "%.1f"), versus(s.HitRatio, ls.HitRatio, "%.3f"), versus(s.MaxInstanceShare, ls.MaxInstanceShare, "%.3f"))
			if hasPred {
				lp, sp := predictionRow(&ls.Prediction), predictionRow(&s.Prediction)
				fmt.Fprintf(&pred, "| %s | %s | %s | %s | %s | %s | %s |\n", l.Variant.Name, run.name, versus(sp[0], lp[0], "%.1f %%"),
					versus(sp[1], lp[1], "%.1f %%"), versus(sp[2], lp[2], "%.2f"), attainment(&s.Prediction, sp[3], lp[3]), versus(sp[4], lp[4], "%.0f"))
			}
		}
	}
	if pred.Len() > 0 {
		b.WriteString("\nPredicted against actual TTFT (|predicted − actual| / actual, after the warm-up) and TTFT targets:\n\n")
		b.WriteString("| variant | run | median error | p90 error | slowest 10 %: predicted/actual | attainment | shed |\n|---|---|---:|---:|---:|---:|---:|\n")
		b.WriteString(pred.String())
	}
	b.WriteString("\nRequest by request, live against the replay (served in both, after the warm-up): placed on the same instance, " +
		"TTFT within 10 %, and the live p90 prediction error of the requests placed alike and of the others:\n\n")
	b.WriteString("| variant | requests | same instance | TTFT within 10 % | p90 error, same instance | p90 error, other instance |\n|---|---:|---:|---:|---:|---:|\n")
	b.WriteString(pairs.String())
	return b.String(), nil
}

// predictionRow is p's compared figures: median and p90 error (%), the
// slowest tenth's median predicted/actual, attainment (%) and shed.
func predictionRow(p *simout.Prediction) [5]float64 {
	return [5]float64{100 * p.MedianAbsRelErr, 100 * p.P90AbsRelErr, p.SlowestRatio, 100 * p.Attainment(), float64(p.Shed)}
}

// attainment is a run's attainment (%), against the live one unless live
// is 0; "—" when the run served no request with a target.
func attainment(p *simout.Prediction, pct, live float64) string {
	if p.WithTarget == 0 {
		return "—"
	}
	return versus(pct, live, "%.1f %%")
}

// routeDelays are a live run's arrival-to-queued times by request id.
func routeDelays(l *sim.Result) map[uint64]time.Duration {
	out := make(map[uint64]time.Duration, len(l.Records))
	for _, r := range l.Records {
		out[r.ID] = r.Routed
	}
	return out
}

// versus formats a simulated figure with its relative difference from the
// live one, marked past compareTolerance.
func versus(simulated, live float64, format string) string {
	s := fmt.Sprintf(format, simulated)
	if live == 0 {
		return s
	}
	d := simulated/live - 1
	mark := ""
	if math.Abs(d) > compareTolerance+1e-9 { // 11 / 10 - 1 is a little above 0.1
		mark = " !"
	}
	return fmt.Sprintf("%s (%+.0f %%%s)", s, 100*d, mark)
}
