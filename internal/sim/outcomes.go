package sim

import (
	"time"

	"github.com/prefixroute/prefixroute/internal/calib"
	"github.com/prefixroute/prefixroute/internal/state"
)

// outcomes is a router variant's gateway reporting each request's time to
// first token (Variant.Outcomes): as prefixrouted does with a matched
// ReportOutcome (server/outcome_calib.go), the request's features from its
// pick feed its deployment's fit (internal/calib), and a new version of
// the fit goes to the pool, whose next picks price with it (policy
// calibration apply). Not safe for concurrent use.
type outcomes struct {
	book *calib.Book
	pool *state.Pool
	pol  string // the pool's name
}

// features notes what the pick made at now predicted from, on r.
func (o *outcomes) features(now time.Duration, r *Request, out *state.Pick) {
	r.picked = now
	d := &out.Decision
	in, res := &out.Snapshot.Instances[d.Instance], &d.Instances[d.Instance]
	tps := in.PrefillTokensPerSecond
	if tps == 0 {
		tps = out.Config.Policy.DefaultPrefillTokensPerSecond
	}
	// The queue as reported, not as the current fit's QueueScale corrected
	// it (the fit learns the correction against it).
	qs := out.Snapshot.Deployments[in.Deployment].Calibration.AppliedQueueScale(&out.Config.Policy)
	r.sample = calib.Sample{Uncached: res.UncachedTokens, Cached: r.PromptTokens - res.UncachedTokens, TPS: tps,
		QueueMs: res.QueueMs / qs, BatchWaitMs: res.BatchWaitMs, QueueSeen: !d.Saturated}
	r.deployment, r.prior = out.Snapshot.Deployments[d.Deployment].Name, out.Config.Policy.DoublingContextTokens
}

// served feeds r's first token to its deployment's fit.
func (o *outcomes) served(r *Request) {
	if r.deployment == "" {
		return
	}
	r.sample.ActualMs = float64(r.FirstToken-r.picked) / 1e6
	if cal, publish, _ := o.book.Add(o.pol, r.deployment, r.prior, &r.sample); publish {
		_ = o.pool.SetCalibration(r.deployment, cal) // in range by construction
	}
}
