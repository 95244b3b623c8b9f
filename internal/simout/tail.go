package simout

import (
	"github.com/prefixroute/prefixroute/internal/sim"

	"encoding/csv"
	"fmt"
	"io"
	"slices"
	"strconv"
	"time"
)

// TailShare is the slowest fraction of requests the tail breakdown covers.
const TailShare = 0.01

// hindsightSlack is how much worse than the best instance's estimate the
// chosen one's may be and still count as the best choice: max(1 ms, 5 %).
func hindsightSlack(best float64) float64 { return max(1, 0.05*best) }

// Tail takes the slowest TailShare of a run's requests (after the warmup,
// by TTFT) apart. The shares are of their summed TTFT: Queue is the time
// waiting for their batch to start (behind other requests), Batch the rest
// of their batch's time that is not their own prefill (others' tokens in the
// batch and its overhead), Own their own uncached prefill less Recompute,
// the part of it another instance held at that moment (a popular prefix
// cold where it went). Best is the fraction whose chosen instance was the
// best in hindsight (Record.Best, within max(1 ms, 5 %)); RegretMs the mean
// of chosen − best estimate. A plain value.
type Tail struct {
	Requests                          int
	TTFTMeanMs                        float64
	Queue, Batch, Own, Recompute      float64
	Best, RegretMs, ChosenMs, BestEst float64
}

// tail returns the slowest TailShare of records arriving from warmup on,
// slowest first.
func slowest(res *sim.Result) []sim.Record {
	var recs []sim.Record
	for _, r := range res.Records {
		if r.Arrival >= res.Warmup {
			recs = append(recs, r)
		}
	}
	slices.SortStableFunc(recs, func(a, b sim.Record) int { return int(b.TTFT - a.TTFT) })
	n := int(float64(len(recs))*TailShare + 0.5)
	if len(recs) > 0 {
		n = max(n, 1)
	}
	return recs[:n]
}

// recomputeMs is the part of r's own prefill that another instance held.
func recomputeMs(r *sim.Record) float64 {
	if r.Prompt == r.Hit {
		return 0
	}
	return float64(r.OwnMs) * float64(r.Recomputed) / float64(r.Prompt-r.Hit)
}

// Tail computes the run's tail breakdown.
func TailOf(res *sim.Result) Tail {
	var t Tail
	var ttft float64
	for _, r := range slowest(res) {
		total := float64(r.TTFT) / 1e6
		wait := float64(r.Wait) / 1e6
		rc := recomputeMs(&r)
		ttft += total
		t.Queue += wait
		t.Batch += total - wait - float64(r.OwnMs)
		t.Own += float64(r.OwnMs) - rc
		t.Recompute += rc
		t.ChosenMs += float64(r.ChosenEstMs)
		t.BestEst += float64(r.BestEstMs)
		t.RegretMs += float64(r.ChosenEstMs - r.BestEstMs)
		if float64(r.ChosenEstMs-r.BestEstMs) <= hindsightSlack(float64(r.BestEstMs)) {
			t.Best++
		}
		t.Requests++
	}
	if t.Requests == 0 {
		return t
	}
	n := float64(t.Requests)
	t.TTFTMeanMs = ttft / n
	t.Queue, t.Batch, t.Own, t.Recompute = t.Queue/ttft, t.Batch/ttft, t.Own/ttft, t.Recompute/ttft
	t.Best, t.RegretMs, t.ChosenMs, t.BestEst = t.Best/n, t.RegretMs/n, t.ChosenMs/n, t.BestEst/n
	return t
}

// WriteRoutesCSV writes every served request's arrival-to-queued time of a
// run (Record.Routed), "request,routed_ms", for RunOptions.RouteDelays.
func WriteRoutesCSV(w io.Writer, res *sim.Result) error {
	cw := csv.NewWriter(w)
	if err := cw.Write([]string{"request", "routed_ms"}); err != nil {
		return err
	}
	for _, r := range res.Records {
		if err := cw.Write([]string{strconv.FormatUint(r.ID, 10), strconv.FormatFloat(float64(r.Routed)/1e6, 'f', 4, 64)}); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// ReadRoutesCSV reads what WriteRoutesCSV wrote, for RunOptions.RouteDelays.
func ReadRoutesCSV(r io.Reader) (map[uint64]time.Duration, error) {
	rows, err := csv.NewReader(r).ReadAll()
	if err != nil {
		return nil, err
	}
	out := make(map[uint64]time.Duration, len(rows))
	for i, row := range rows {
		if i == 0 && len(row) > 0 && row[0] == "request" {
			continue
		}
		if len(row) != 2 {
			return nil, fmt.Errorf("routes line %d: want request,routed_ms", i+1)
		}
		id, err := strconv.ParseUint(row[0], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("routes line %d: request: %w", i+1, err)
		}
		ms, err := strconv.ParseFloat(row[1], 64)
		if err != nil || !(ms >= 0 && ms < 1e9) {
			return nil, fmt.Errorf("routes line %d: routed_ms %q: want a number of ms in [0, 1e9)", i+1, row[1])
		}
		out[id] = time.Duration(ms * 1e6)
	}
	return out, nil
}

// WriteTailCSV writes the slowest TailShare of every run's requests, one
// row each: the TTFT and its parts in ms (queue + batch + own + recompute =
// ttft), the instance chosen and the best in hindsight with their
// estimates.
func WriteTailCSV(w io.Writer, runs []*sim.Result) error {
	cw := csv.NewWriter(w)
	if err := cw.Write([]string{"variant", "request", "arrival_s", "ttft_ms", "queue_ms", "batch_ms", "own_prefill_ms",
		"recompute_ms", "prompt_tokens", "hit_tokens", "chosen", "best_in_hindsight", "chosen_est_ms", "best_est_ms"}); err != nil {
		return err
	}
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', 3, 64) }
	for _, res := range runs {
		for _, r := range slowest(res) {
			total, wait, rc := float64(r.TTFT)/1e6, float64(r.Wait)/1e6, recomputeMs(&r)
			best := ""
			if r.Best >= 0 && int(r.Best) < len(res.Instances) {
				best = res.Instances[r.Best].ID
			}
			row := []string{res.Variant.Name, strconv.FormatUint(r.ID, 10), f(float64(r.Arrival) / float64(time.Second)),
				f(total), f(wait), f(total - wait - float64(r.OwnMs)), f(float64(r.OwnMs) - rc), f(rc),
				strconv.FormatUint(uint64(r.Prompt), 10), strconv.FormatUint(uint64(r.Hit), 10),
				res.Instances[r.Instance].ID, best, f(float64(r.ChosenEstMs)), f(float64(r.BestEstMs))}
			if err := cw.Write(row); err != nil {
				return err
			}
		}
	}
	cw.Flush()
	return cw.Error()
}
