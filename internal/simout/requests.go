package simout

import (
	"encoding/csv"
	"io"
	"strconv"

	"github.com/prefixroute/prefixroute/internal/sim"
)

// requestsHeader is the header of WriteRequestsCSV, one column per field
// of a served request, every time in virtual ms.
var requestsHeader = []string{"request", "arrival_ms", "routed_ms", "instance", "prompt_tokens", "hit_tokens",
	"predicted_hit_tokens", "predicted_ms", "predicted_queue_ms", "ahead_ms", "own_prefill_ms", "wait_ms", "ttft_ms", "target_ms"}

// WriteRequestsCSV writes every served request of a run, in the order of
// its first token, one row each: when it arrived and reached its instance,
// where it went, its prompt and the tokens hit there and as the router
// predicted, the router's predicted TTFT and the queue it priced ahead
// (0 for baselines), the exact queue it joined (ahead_ms), its own
// uncached prefill, its wait for a batch and its TTFT. Together they take a
// prediction error apart: predicted_queue_ms against ahead_ms is the
// router's view of the queue, predicted_hit_tokens against hit_tokens its
// view of the cache.
func WriteRequestsCSV(w io.Writer, res *sim.Result) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(requestsHeader); err != nil {
		return err
	}
	ms := func(v float64) string { return strconv.FormatFloat(v, 'f', 3, 64) }
	u := func(v uint32) string { return strconv.FormatUint(uint64(v), 10) }
	row := make([]string, len(requestsHeader))
	for i := range res.Records {
		r := &res.Records[i]
		row = append(row[:0], strconv.FormatUint(r.ID, 10), ms(float64(r.Arrival)/1e6), ms(float64(r.Routed)/1e6),
			res.Instances[r.Instance].ID, u(r.Prompt), u(r.Hit), u(r.Predicted), ms(float64(r.PredictedMs)),
			ms(float64(r.PredictedQueueMs)), ms(float64(r.AheadMs)), ms(float64(r.OwnMs)), ms(float64(r.Wait)/1e6),
			ms(float64(r.TTFT)/1e6), ms(float64(r.TargetMs)))
		if err := cw.Write(row); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}
