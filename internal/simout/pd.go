package simout

import (
	"fmt"
	"io"

	"github.com/prefixroute/prefixroute/internal/sim"
)

// WritePDMarkdown writes the PD comparison: one row per variant, each
// figure the median over its seeds (sim.PDRun defines them).
func WritePDMarkdown(w io.Writer, sums []sim.PDSummary) error {
	_, err := fmt.Fprint(w, "| variant | decider | remote | TTFT p50 | TTFT p99 | TTFT mean | excess p99 | own p99 | TPOT p50 | TPOT mean | TPOT p99 | stall | stalled | slot wait p99 | prefill busy | local busy |\n"+
		"|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	if err != nil {
		return err
	}
	for _, s := range sums {
		_, err := fmt.Fprintf(w, "| %s | %s | %.0f %% | %.0f ms | %.0f ms | %.0f ms | %.0f ms | %.0f ms | %.2f ms | %.2f ms | %.2f ms | %.3f ms/token | %.0f %% | %.0f ms | %.0f %% | %.0f %% |\n",
			s.Variant, s.Decider, 100*s.RemoteShare, s.TTFTP50Ms, s.TTFTP99Ms, s.TTFTMeanMs, s.ExcessP99Ms, s.OwnP99Ms, s.TPOTP50Ms, s.TPOTMeanMs, s.TPOTP99Ms,
			s.StallMsPerToken, 100*s.StalledShare, s.SlotWaitP99Ms, 100*s.PrefillBusy, 100*s.LocalBusy)
		if err != nil {
			return err
		}
	}
	return nil
}

// PDAim is issue 30's aim checked on medians: the router's TTFT p99 at
// most 0.8 × the best baseline's (always, llmd, dynamo), with a decode
// interference (stall ms per token) no worse than that baseline's.
type PDAim struct {
	Ours, Best       sim.PDSummary
	Ratio            float64 // ours' TTFT p99 / the best baseline's
	P99Met, StallMet bool
}

// CheckPDAim finds the router's variant and the best baseline in sums; ok
// is false when either is missing.
func CheckPDAim(sums []sim.PDSummary) (a PDAim, ok bool) {
	oi, bi := -1, -1
	for i, s := range sums {
		switch s.Decider {
		case "router":
			if oi < 0 {
				oi = i
			}
		case "always", "llmd", "dynamo":
			if bi < 0 || s.TTFTP99Ms < sums[bi].TTFTP99Ms {
				bi = i
			}
		}
	}
	if oi < 0 || bi < 0 {
		return a, false
	}
	a.Ours, a.Best = sums[oi], sums[bi]
	if a.Best.TTFTP99Ms > 0 {
		a.Ratio = a.Ours.TTFTP99Ms / a.Best.TTFTP99Ms
	}
	a.P99Met = a.Ours.TTFTP99Ms <= 0.8*a.Best.TTFTP99Ms
	a.StallMet = a.Ours.StallMsPerToken <= a.Best.StallMsPerToken
	return a, true
}

// String states the aim's outcome in one paragraph.
func (a PDAim) String() string {
	met := func(b bool) string {
		if b {
			return "met"
		}
		return "missed"
	}
	return fmt.Sprintf("aim (TTFT p99 ≤ 0.8 × the best baseline, no worse decode interference): best baseline %s (%s), TTFT p99 %.0f ms; "+
		"%s %.0f ms = %.2f× (%s; 0.8× is %.0f ms); stall %.3f vs %.3f ms/token (%s)",
		a.Best.Variant, a.Best.Decider, a.Best.TTFTP99Ms, a.Ours.Variant, a.Ours.TTFTP99Ms, a.Ratio, met(a.P99Met),
		0.8*a.Best.TTFTP99Ms, a.Ours.StallMsPerToken, a.Best.StallMsPerToken, met(a.StallMet))
}
