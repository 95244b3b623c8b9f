package simout

import (
	"github.com/prefixroute/prefixroute/internal/sim"

	"encoding/csv"
	"fmt"
	"image/color"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// writeReadinessMarkdown appends the readiness tables when a summary has a
// probe.
func writeReadinessMarkdown(b *strings.Builder, sums []Summary) {
	var rs []*sim.ReadinessResult
	var names []string
	for i := range sums {
		if r := sums[i].Readiness; r != nil {
			rs, names = append(rs, r), append(names, sums[i].Label())
		}
	}
	if len(rs) == 0 {
		return
	}
	r0 := rs[0]
	from, to := r0.From, r0.To
	fmt.Fprintf(b, "\nReadiness probe: router 0's migration estimate %s → %s (state.Pool.Migration at the probe) against what the "+
		"run measured in the window after %s's weight reached 0. Recompute is in tokens; rates are %s's prefill tokens/s "+
		"(requests by arrival), \"before\" over the span the estimate covered, \"after\" over the window from the cutover. "+
		"Busy is the share of %s's instance time in prefill batches (overheads included); the estimate's load is "+
		"100%% − its headroom.\n\n", from, to, from, to, to)
	b.WriteString("| variant | probe → cutover | before / after | recompute: estimated | actual | est / actual | " +
		"extra tokens/s: estimated | actual | est / actual | " + to + " load before: estimated → busy | after: estimated → busy | " +
		"can absorb | " + to + " TTFT p99 ms before → after |\n")
	b.WriteString("|---|---|---|---:|---:|---:|---:|---:|---:|---|---|---|---|\n")
	for i, r := range rs {
		m := &r.Status.Migration
		before := fmt.Sprintf("%.0f%% → %.0f%%", 100*ratio(m.ToPrefillMsPerSec, m.ToCapacityMsPerSec), 100*r.ToBusyBefore)
		after := "unknown"
		if m.HeadroomKnown {
			after = fmt.Sprintf("%.0f%% → %.0f%%", 100-m.HeadroomPct, 100*r.ToBusyAfter)
		}
		fmt.Fprintf(b, "| %s | %v → %v | %v / %v | %.4g | %.4g | %.2f | %.0f | %.0f | %.2f | %s | %s | %v | %.0f → %.0f |\n",
			names[i], r.At, r.Cutover, r.Before, r.After, m.RecomputeTokens, float64(r.RecomputedTokens), r.RecomputeRatio(),
			m.ExtraTokensPerSec, r.ActualExtraPerSec, r.ExtraRatio(), before, after, m.CanAbsorb,
			r.ToTTFTP99Before, r.ToTTFTP99After)
	}
	fmt.Fprintf(b, "\nRecompute, block by block (%d tokens each). E: the set the estimate's sketch counts (the blocks of %s's "+
		"picks that %s lacked, hashes[matched_%s:], in the recompute horizon, the last %v before the probe), counted exactly; "+
		"R: the blocks %s recomputed (held by %s and not by %s at the cutover, prefilled by %s for requests in the after "+
		"window, each once). \"later\" adds those first prefilled after the window, until the run's end.\n\n",
		r0.BlockTokens, from, to, to, r0.Status.Migration.RecomputeHorizon, to, from, to, to)
	b.WriteString("| variant | sketch | E | E ∩ R | E only: " + to + " held it at cutover | " + from + " evicted it | " +
		"not requested | R | R only: carried after the probe | carried before the horizon | never carried | " +
		"R + later | " + from + "-only blocks at cutover |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for i, r := range rs {
		g := &r.Gap
		fmt.Fprintf(b, "| %s | %d | %d | %d | %d | %d | %d | %d | %d | %d | %d | %d (+%v) | %d |\n", names[i],
			r.Status.Migration.DistinctBlocks, g.Exact, g.Both, g.ToHeld, g.FromEvicted, g.NotRequested, r.RecomputedBlocks,
			g.GapMatched, g.OlderMatched, g.NeverMatched, r.RecomputedBlocks+g.RecomputedLater, g.LaterSpan, r.FromOnlyBlocks)
	}
	if len(r0.Gap.ExactByClass) > 1 {
		b.WriteString("\nE and R by workload class (the class of the last pick that carried a block of E, of the request that " +
			"recomputed a block of R):\n\n| variant | E | R |\n|---|---|---|\n")
		for i, r := range rs {
			fmt.Fprintf(b, "| %s | %s | %s |\n", names[i], joinU(r.Gap.ExactByClass), joinU(r.Gap.RecomputedByClass))
		}
	}
	fmt.Fprintf(b, "\nThe extra prefill, tokens/s. Moved: the estimate's (the share f of %s's own prefill in the window, "+
		"as the router recorded it), that prefill, and the actual (extra − recompute). "+
		"%s's prefill by kind of block, after − before: new (no instance held it) and partial (prompts' trailing partial "+
		"blocks); elsewhere (held by another instance) and %s-only blocks prefilled again.\n\n", from, to, from)
	b.WriteString("| variant | moved: estimated | " + from + "'s prefill | actual | Δ new + partial | Δ elsewhere + again | " +
		"recompute/s: estimated | actual |\n|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for i, r := range rs {
		x, y := r.Gap.Before, r.Gap.After
		m := &r.Status.Migration
		recAct := 0.0
		if r.After > 0 {
			recAct = float64(r.RecomputedTokens) / r.After.Seconds()
		}
		fmt.Fprintf(b, "| %s | %.0f | %.0f | %.0f | %.0f | %.0f | %.0f | %.0f |\n", names[i], m.MovedPrefillTokensPerSec,
			r.FromPrefillPerSec(), r.ActualMovedPerSec(), y.New+y.Partial-x.New-x.Partial, y.Elsewhere+y.FromOnlyAgain-x.Elsewhere,
			m.RecomputeTokensPerSec, recAct)
	}
	fmt.Fprintf(b, "\nOther recompute estimators, in blocks, exactly on the same picks, against R. E: the blocks %s's picks "+
		"matched deeper than %s (hashes[matched_%s:matched_%s]), over the whole window (the former estimate) and the last "+
		"quarter; W (E plus the blocks each pick on %s prefilled, hashes[matched_%s:], the estimate's set now) over the last "+
		"eighth and quarter of the window; W's recurrence (blocks in W in both halves of the window, and in both of its last "+
		"two quarters); the snapshot analogue (of the blocks %s held and %s lacked one window before the probe, those "+
		"requested in the window).\n\n", from, to, to, from, from, to, from, to)
	b.WriteString("| variant | R | E, window | E, last 1/4 | W, last 1/8 | W, last 1/4 | W in both halves | W in both last quarters | snapshot analogue |\n" +
		"|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for i, r := range rs {
		w := &r.Gap.WhatIf
		rr := float64(max(r.RecomputedBlocks, 1))
		cell := func(v uint64) string { return fmt.Sprintf("%d (%.2f×)", v, float64(v)/rr) }
		fmt.Fprintf(b, "| %s | %d | %s | %s | %s | %s | %s | %s | %s |\n", names[i], r.RecomputedBlocks, cell(w.LastE[7]),
			cell(w.LastE[1]), cell(w.LastW[0]), cell(w.LastW[1]), cell(w.RecurW2), cell(w.RecurW4), cell(w.Snapshot))
	}
	if r0.Routers > 1 {
		fmt.Fprintf(b, "\nThe estimate is router 0's, which saw 1/%d of the picks; the measurement is the whole fleet's.\n", r0.Routers)
	}
}

func joinU(v []uint64) string {
	parts := make([]string, len(v))
	for i, x := range v {
		parts[i] = strconv.FormatUint(x, 10)
	}
	return strings.Join(parts, " / ")
}

// readinessCSVHead is the header of WriteReadinessCSV.
var readinessCSVHead = []string{"variant", "from", "to", "at_s", "cutover_s", "window_s", "before_s", "after_s",
	"est_distinct_blocks", "est_recompute_tokens", "est_recompute_tokens_per_s", "est_moved_tokens_per_s",
	"est_extra_tokens_per_s", "est_extra_prefill_ms_per_s", "est_headroom_pct", "est_can_absorb", "est_hot_prefixes",
	"act_recompute_blocks", "act_recompute_tokens", "recompute_est_over_act",
	"to_prefill_before_per_s", "to_prefill_after_per_s", "act_extra_tokens_per_s", "extra_est_over_act", "act_moved_tokens_per_s",
	"to_busy_before", "to_busy_after", "to_ttft_p99_before_ms", "to_ttft_p99_after_ms",
	"gap_exact", "gap_both", "gap_to_held", "gap_from_evicted", "gap_not_requested",
	"gap_matched_after_probe", "gap_matched_earlier", "gap_never_matched", "gap_recomputed_later", "gap_later_s",
	"from_only_blocks_at_cutover", "from_prefill_per_s",
	"before_new_per_s", "before_partial_per_s", "before_elsewhere_per_s",
	"after_new_per_s", "after_partial_per_s", "after_from_only_first_per_s", "after_from_only_again_per_s", "after_elsewhere_per_s",
	"whatif_e_last30s", "whatif_w_last15s", "whatif_w_last30s", "whatif_snapshot", "whatif_snapshot_from_only",
	"whatif_e_window", "whatif_w_both_halves", "whatif_w_both_last_quarters"}

// WriteReadinessCSV writes one row per run with a readiness probe: the
// estimate, the measurement and the gap decomposition (ReadinessResult,
// ReadinessGap). It writes only the header when no run has a probe.
func WriteReadinessCSV(w io.Writer, runs []*sim.Result) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(readinessCSVHead); err != nil {
		return err
	}
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', 4, 64) }
	u := func(v uint64) string { return strconv.FormatUint(v, 10) }
	s := func(d time.Duration) string { return f(d.Seconds()) }
	for _, res := range runs {
		r := res.Readiness
		if r == nil {
			continue
		}
		m, g := &r.Status.Migration, &r.Gap
		row := []string{res.Variant.Name, r.From, r.To, s(r.At), s(r.Cutover), s(r.Window), s(r.Before), s(r.After),
			u(m.DistinctBlocks), f(m.RecomputeTokens), f(m.RecomputeTokensPerSec), f(m.MovedPrefillTokensPerSec),
			f(m.ExtraTokensPerSec), f(m.ExtraPrefillMsPerSec), f(m.HeadroomPct), strconv.FormatBool(m.CanAbsorb),
			strconv.Itoa(len(r.Status.HotPrefixes)),
			u(r.RecomputedBlocks), u(r.RecomputedTokens), f(r.RecomputeRatio()),
			f(r.ToBeforePerSec), f(r.ToAfterPerSec), f(r.ActualExtraPerSec), f(r.ExtraRatio()), f(r.ActualMovedPerSec()),
			f(r.ToBusyBefore), f(r.ToBusyAfter), f(r.ToTTFTP99Before), f(r.ToTTFTP99After),
			u(g.Exact), u(g.Both), u(g.ToHeld), u(g.FromEvicted), u(g.NotRequested),
			u(g.GapMatched), u(g.OlderMatched), u(g.NeverMatched), u(g.RecomputedLater), s(g.LaterSpan),
			u(r.FromOnlyBlocks), f(r.FromPrefillPerSec()),
			f(g.Before.New), f(g.Before.Partial), f(g.Before.Elsewhere),
			f(g.After.New), f(g.After.Partial), f(g.After.FromOnlyFirst), f(g.After.FromOnlyAgain), f(g.After.Elsewhere),
			u(g.WhatIf.LastE[1]), u(g.WhatIf.LastW[0]), u(g.WhatIf.LastW[1]), u(g.WhatIf.Snapshot), u(g.WhatIf.SnapshotFromOnly),
			u(g.WhatIf.LastE[7]), u(g.WhatIf.RecurW2), u(g.WhatIf.RecurW4)}
		if err := cw.Write(row); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// readinessPlot draws, one panel per run with a probe, To's prefilled
// tokens per second around the cutover in windows of Scenario.Smooth:
// solid the measured rate, dotted the measured mean before (the estimate's
// span) and after (the window from the cutover), dashed the level the
// estimate predicts after the cutover (the before mean plus the estimated
// extra); grey lines mark the probe and the cutover.
func readinessPlot(path string, sc *sim.Scenario, runs []*sim.Result) error {
	var rs []*sim.Result
	for _, res := range runs {
		if res.Readiness != nil {
			rs = append(rs, res)
		}
	}
	if len(rs) == 0 {
		return nil
	}
	w := max(1, int(sc.Smooth.D()/time.Second))
	var panels []*plot.Plot
	var kept []*sim.ReadinessResult
	hi := 0.0
	for i, res := range rs {
		r := res.Readiness
		ti := slices.Index(res.Deployments, r.To)
		p := plot.New()
		p.Title.Text = fmt.Sprintf("%s: %s's prefilled tokens/s per %v", res.Variant.Name, r.To, sc.Smooth)
		p.Title.TextStyle.Font.Size = vg.Points(9)
		p.X.Label.Text = "time (s)"
		p.Y.Label.Text = "tokens/s"
		p.Legend.Top, p.Legend.Left = true, true
		p.Legend.TextStyle.Font.Size = vg.Points(7)
		from := max(0, int((r.At-r.Before)/time.Second)-120)
		to := int((r.Cutover+r.After)/time.Second) + 120
		series := Series(res)
		var xys plotter.XYs
		for s := from; s+w <= min(to, len(series)); s += w {
			var sum uint64
			for _, sec := range series[s : s+w] {
				sum += sec.DepPrefilled[ti]
			}
			v := float64(sum) / float64(w)
			xys = append(xys, plotter.XY{X: float64(s), Y: v})
			hi = max(hi, v)
		}
		if len(xys) < 2 {
			continue
		}
		l, err := plotter.NewLine(xys)
		if err != nil {
			return err
		}
		variantStyle(l, i)
		p.Add(l)
		p.Legend.Add("measured", l)
		seg := func(x0, x1, y float64, c color.Color, dashes []vg.Length) (*plotter.Line, error) {
			l, err := plotter.NewLine(plotter.XYs{{X: x0, Y: y}, {X: x1, Y: y}})
			if err != nil {
				return nil, err
			}
			l.Color, l.Dashes, l.Width = c, dashes, vg.Points(1.5)
			p.Add(l)
			hi = max(hi, y)
			return l, nil
		}
		at, cut, end := r.At.Seconds(), r.Cutover.Seconds(), (r.Cutover + r.After).Seconds()
		dot := []vg.Length{vg.Points(1), vg.Points(2)}
		mb, err := seg(at-r.Before.Seconds(), at, r.ToBeforePerSec, color.Black, dot)
		if err != nil {
			return err
		}
		if _, err := seg(cut, end, r.ToAfterPerSec, color.Black, dot); err != nil {
			return err
		}
		est := r.ToBeforePerSec + r.Status.Migration.ExtraTokensPerSec
		el, err := seg(cut, end, est, color.RGBA{214, 39, 40, 255}, []vg.Length{vg.Points(6), vg.Points(3)})
		if err != nil {
			return err
		}
		p.Legend.Add(fmt.Sprintf("measured mean: %.0f before, %.0f after", r.ToBeforePerSec, r.ToAfterPerSec), mb)
		p.Legend.Add(fmt.Sprintf("estimated after: %.0f + %.0f = %.0f", r.ToBeforePerSec, r.Status.Migration.ExtraTokensPerSec, est), el)
		panels, kept = append(panels, p), append(kept, r) // the probe and cutover marks wait for hi
	}
	if len(panels) == 0 {
		return nil
	}
	cols := min(2, len(panels))
	rows := (len(panels) + cols - 1) / cols
	grid := make([][]*plot.Plot, rows)
	for j := range grid {
		grid[j] = make([]*plot.Plot, cols)
	}
	for k, p := range panels {
		r := kept[k]
		for _, x := range []float64{r.At.Seconds(), r.Cutover.Seconds()} {
			l, err := plotter.NewLine(plotter.XYs{{X: x, Y: 0}, {X: x, Y: hi * 1.15}})
			if err != nil {
				return err
			}
			l.Color, l.Dashes = color.Gray{Y: 150}, []vg.Length{vg.Points(2), vg.Points(2)}
			p.Add(l)
		}
		p.Y.Min, p.Y.Max = 0, hi*1.15
		grid[k/cols][k%cols] = p
	}
	const width, rowHeight = 11 * vg.Inch, 3.4 * vg.Inch
	img := vgimg.New(width, rowHeight*vg.Length(rows))
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: rows, Cols: cols, PadX: vg.Millimeter * 4, PadY: vg.Millimeter * 4,
		PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}
	canvases := plot.Align(grid, tiles, dc)
	for j := range grid {
		for i, p := range grid[j] {
			if p != nil {
				p.Draw(canvases[j][i])
			}
		}
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	_, err = vgimg.PngCanvas{Canvas: img}.WriteTo(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// ratio is a / b, 0 when b is 0.
func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}
