package simout

import (
	"github.com/prefixroute/prefixroute/internal/sim"

	"encoding/csv"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

// WriteCSV writes the run's per-second series: one row per virtual second
// (by arrival), with the hit ratio, traffic share and weight share of each
// deployment, the prefilled tokens in all and per deployment, and the
// queue estimate of each instance.
func WriteCSV(w io.Writer, res *sim.Result) error {
	cw := csv.NewWriter(w)
	head := []string{"t_s", "requests", "rejected", "ttft_p50_ms", "ttft_p99_ms", "hit_ratio"}
	for _, d := range res.Deployments {
		head = append(head, "hit_ratio_"+d)
	}
	for _, d := range res.Deployments {
		head = append(head, "share_"+d)
	}
	for _, d := range res.Deployments {
		head = append(head, "weight_share_"+d)
	}
	head = append(head, "prompt_tokens", "hit_tokens", "prefilled_tokens", "recomputed_tokens")
	for _, d := range res.Deployments {
		head = append(head, "prefilled_tokens_"+d)
	}
	for _, in := range res.Instances {
		head = append(head, "queue_ms_"+in.ID)
	}
	if err := cw.Write(head); err != nil {
		return err
	}
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', 4, 64) }
	u := func(v uint64) string { return strconv.FormatUint(v, 10) }
	for _, s := range Series(res) {
		row := []string{strconv.Itoa(s.T), strconv.Itoa(s.Requests), strconv.Itoa(s.Rejected), f(s.TTFTP50Ms), f(s.TTFTP99Ms), f(s.HitRatio)}
		for _, v := range s.DepHit {
			row = append(row, f(v))
		}
		for _, v := range s.DepShare {
			row = append(row, f(v))
		}
		for _, v := range s.Weights {
			row = append(row, f(v))
		}
		row = append(row, u(s.Prompt), u(s.Hit), u(s.Prefilled), u(s.Recomputed))
		for _, v := range s.DepPrefilled {
			row = append(row, u(v))
		}
		for i := range res.Instances {
			v := 0.0
			if i < len(s.QueueMs) {
				v = s.QueueMs[i]
			}
			row = append(row, f(v))
		}
		if err := cw.Write(row); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// Label is the variant's name, marked when it is a simulator baseline (the
// llm-d-style scorer as "(precise prefix, baseline)").
func (s *Summary) Label() string {
	if s.Picker == "llmd" {
		return s.Variant + " (precise prefix, baseline)"
	}
	if s.Baseline {
		return s.Variant + " (baseline)"
	}
	return s.Variant
}

// WriteMarkdown writes the summary tables of one scenario's runs: the main
// table, and the dips after each weight change when there are any.
func WriteMarkdown(w io.Writer, sc *sim.Scenario, sums []Summary) error {
	var b strings.Builder
	multi := len(sc.Deployments) > 1
	fmt.Fprintf(&b, "| variant | TTFT p50 ms | TTFT p99 ms | TTFT max ms | hit ratio | router-predicted hit | max instance share |")
	if multi {
		fmt.Fprintf(&b, " share per deployment (%s) | %s: max 60 s share error (σ) |", strings.Join(depNames(sc), ":"), sc.Focus)
	}
	b.WriteString(" longest queue ms (mean queue) | recomputed tokens | rejected |\n|---|---:|---:|---:|---:|---:|---:|")
	if multi {
		b.WriteString("---|---:|")
	}
	b.WriteString("---:|---:|---:|\n")
	for i := range sums {
		s := &sums[i]
		pred := fmt.Sprintf("%.3f", s.PredictedHitRatio)
		if s.Baseline {
			pred = "—"
		}
		fmt.Fprintf(&b, "| %s | %.1f | %.1f | %.1f | %.3f | %s | %.3f (%s) |", s.Label(), s.TTFTP50, s.TTFTP99, s.TTFTMax,
			s.HitRatio, pred, s.MaxInstanceShare, s.MaxInstance)
		if multi {
			parts := make([]string, len(s.DepShare))
			for d, v := range s.DepShare {
				parts[d] = fmt.Sprintf("%.2f%%", 100*v)
			}
			errCol := "—"
			if s.ShareSigma > 0 {
				errCol = fmt.Sprintf("%.2f pp (%.2f pp)", 100*s.ShareErrorMax, 100*s.ShareSigma)
			}
			fmt.Fprintf(&b, " %s | %s |", strings.Join(parts, " : "), errCol)
		}
		fmt.Fprintf(&b, " %.0f (%.0f) | %.3g (%.1f%% of prefilled) | %d |\n", s.QueueMaxMs, s.QueueMeanMs, float64(s.Recomputed), 100*float64(s.Recomputed)/float64(max(s.Prefilled, 1)), s.Rejected)
	}
	writePrediction(&b, sums)
	if multi && len(sc.Workload.Classes) > 1 {
		fmt.Fprintf(&b, "\nShare of each workload class's requests served by %s:\n\n| variant |", sc.Focus)
		for _, c := range sc.Workload.Classes {
			fmt.Fprintf(&b, " %s (%.0f%% of traffic) |", c.Name, 100*c.Share/classTotal(sc))
		}
		b.WriteString("\n|---|" + strings.Repeat("---:|", len(sc.Workload.Classes)) + "\n")
		for i := range sums {
			fmt.Fprintf(&b, "| %s |", sums[i].Label())
			for _, v := range sums[i].FocusClassShare {
				fmt.Fprintf(&b, " %.2f%% |", 100*v)
			}
			b.WriteString("\n")
		}
	}
	if slices.ContainsFunc(sums, func(s Summary) bool { return len(s.Dips) > 0 }) {
		b.WriteString("\nHit-ratio dip after each weight change (smoothed over " + sc.Smooth.String() + "):\n\n")
		b.WriteString("| variant | at | weights | hit before | lowest | depth | lowest after | below half-depth | recovered (±0.02) after | peak TTFT p99 ms | peak prefill / before |\n")
		b.WriteString("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
		for i := range sums {
			s := &sums[i]
			for _, d := range s.Dips {
				rec := "not by next change"
				if d.Recovery >= 0 {
					rec = d.Recovery.String()
				}
				fmt.Fprintf(&b, "| %s | %v | %s | %.3f | %.3f | %.3f | %v | %v | %s | %.0f | %.2f× |\n", s.Label(), d.At,
					weightsString(sc, d.Weights), d.Baseline, d.Min, d.Depth, d.MinAfter, d.HalfWidth, rec, d.PeakTTFTP99, d.PeakPrefillRatio)
			}
		}
	}
	b.WriteString("\nLoad and the slowest 1 % (shares of their TTFT: waiting for their batch, the rest of their batch, own new prefill, own prefill of blocks another instance held; best: chosen instance best in hindsight within max(1 ms, 5 %)):\n\n")
	b.WriteString("| variant | busy mean (min-max) | starved s | longest queue at end ms | tail mean TTFT ms | queue | batch | own | recompute | best in hindsight | regret ms |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for i := range sums {
		s := &sums[i]
		t := &s.Tail
		fmt.Fprintf(&b, "| %s | %.2f (%.2f-%.2f) | %.1f%% | %.0f | %.1f | %.0f%% | %.0f%% | %.0f%% | %.0f%% | %.0f%% | %.1f |\n", s.Label(),
			s.BusyMean, s.BusyMin, s.BusyMax, 100*s.Starved, s.QueueEndMaxMs, t.TTFTMeanMs, 100*t.Queue, 100*t.Batch, 100*t.Own,
			100*t.Recompute, 100*t.Best, t.RegretMs)
	}
	writeReadinessMarkdown(&b, sums)
	_, err := io.WriteString(w, b.String())
	return err
}

func classTotal(sc *sim.Scenario) float64 {
	t := 0.0
	for _, c := range sc.Workload.Classes {
		t += c.Share
	}
	return t
}

func depNames(sc *sim.Scenario) []string {
	out := make([]string, len(sc.Deployments))
	for i, d := range sc.Deployments {
		out[i] = d.Name
	}
	return out
}

// weightsString formats weights in deployment order, e.g. "1:9".
func weightsString(sc *sim.Scenario, w map[string]float64) string {
	parts := make([]string, len(sc.Deployments))
	for i, d := range sc.Deployments {
		parts[i] = strconv.FormatFloat(w[d.Name], 'g', -1, 64)
	}
	return strings.Join(parts, ":")
}
