package server

import (
	"context"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/internal/calib"
	"github.com/prefixroute/prefixroute/internal/state"
	"github.com/prefixroute/prefixroute/scheduler"
)

// bookFeatures fills the prediction's features of e, the pick pk's chosen
// instance, for learn.
func bookFeatures(e *PickOutcome, pk *state.Pick, promptTokens uint32) {
	d := &pk.Decision
	in, r := &pk.Snapshot.Instances[d.Instance], &d.Instances[d.Instance]
	pol := &pk.Config.Policy
	e.Uncached, e.Cached = r.UncachedTokens, promptTokens-min(r.UncachedTokens, promptTokens)
	e.TPS = in.PrefillTokensPerSecond
	if e.TPS == 0 {
		e.TPS = pol.DefaultPrefillTokensPerSecond
	}
	e.BatchWaitMs, e.PredictedTTFTMs, e.PriorDoubling = r.BatchWaitMs, r.PredictedTTFTMs(), pol.DoublingContextTokens
	c := &pk.Snapshot.Deployments[in.Deployment].Calibration
	if pol.Calibration == scheduler.CalibrationApply {
		e.CalibrationVersion = c.Version
	}
	// The fit learns the queue correction against the queue as reported,
	// not as corrected by the previous fit.
	e.RawQueueMs = r.QueueMs / c.AppliedQueueScale(pol)
	e.QueueSeen = !d.Saturated && in.ReportAge.Milliseconds() <= calib.MaxQueueSeenAgeMs
	e.TTFTTargetMs, e.SLOMet = d.TTFTTargetMs, d.SLOMet
}

// learn takes a matched outcome: a served one with a ttft is recorded in
// the prediction metrics (observed/predicted, target attainment) and fed to
// its deployment's prefill fit, unless the gateway fell back to another
// instance than the pick's (the router did not see that queue); a fit that
// makes a new version is handed to the pool, whose next picks use it.
func (s *Server) learn(ctx context.Context, pool *state.Pool, e *PickOutcome) {
	if !e.HasTTFT || e.Status != pb.OutcomeStatus_OUTCOME_STATUS_SERVED {
		return
	}
	s.outcomes.predicted(ctx, e)
	smp := calib.Sample{Uncached: e.Uncached, Cached: e.Cached, TPS: e.TPS, QueueMs: e.RawQueueMs, BatchWaitMs: e.BatchWaitMs,
		ActualMs: e.TTFTMs, QueueSeen: e.QueueSeen && e.Tried == e.Instance}
	if cal, publish, _ := s.fits.Add(e.Pool, e.Deployment, e.PriorDoubling, &smp); publish {
		_ = pool.SetCalibration(e.Deployment, cal) // in range by construction; a full pool keeps the prior
	}
}

// Calibration returns the prefill fits of pool's deployments (prefixctl
// calibration POOL). Safe for concurrent use.
func (s *Server) Calibration(pool string) []calib.DeploymentStatus { return s.fits.Pool(pool) }

// ratioBuckets are the bucket boundaries of
// prefixroute_ttft_observed_over_predicted: 0.25 to 4.
var ratioBuckets = []float64{0.25, 0.5, 0.67, 0.8, 0.9, 1, 1.1, 1.25, 1.5, 2, 4}

// predObs holds the prediction metrics of outcomes, per pool and
// deployment (names from the pick book, so from the registry). Safe for
// concurrent use.
type predObs struct {
	ratio  metric.Float64Histogram
	slo    metric.Int64Counter
	mu     sync.RWMutex
	labels map[[2]string]*predLabels
}

type predLabels struct {
	ratio []metric.RecordOption
	met   [2][]metric.AddOption // missed, met
}

func newPredObs(m metric.Meter) (*predObs, error) {
	h, err := m.Float64Histogram("prefixroute_ttft_observed_over_predicted", metric.WithUnit("1"),
		metric.WithDescription("Observed TTFT (served outcomes' ttft_ms) over the pick's predicted_ttft_ms, by pool and deployment: 1 is a true prediction."),
		metric.WithExplicitBucketBoundaries(ratioBuckets...))
	if err != nil {
		return nil, err
	}
	c, err := m.Int64Counter("prefixroute_slo_outcomes", metric.WithUnit("{outcome}"),
		metric.WithDescription("Served outcomes of picks with a TTFT target (ttft_slo_ms, x-slo-ttft-ms), by pool, deployment and met (true: ttft_ms at or under the target). Attainment = met=true / all."))
	if err != nil {
		return nil, err
	}
	return &predObs{ratio: h, slo: c, labels: make(map[[2]string]*predLabels)}, nil
}

func (o *predObs) of(pool, dep string) *predLabels {
	k := [2]string{pool, dep}
	o.mu.RLock()
	l := o.labels[k]
	o.mu.RUnlock()
	if l != nil {
		return l
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if l = o.labels[k]; l == nil {
		pa, da := attribute.String("pool", pool), attribute.String("deployment", dep)
		l = &predLabels{ratio: []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(pa, da))}}
		for i, met := range []bool{false, true} {
			l.met[i] = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(pa, da, attribute.Bool("met", met)))}
		}
		o.labels[k] = l
	}
	return l
}

// record adds one served outcome with its ttft.
func (o *predObs) record(ctx context.Context, e *PickOutcome) {
	l := o.of(e.Pool, e.Deployment)
	if e.PredictedTTFTMs > 0 {
		o.ratio.Record(ctx, e.TTFTMs/e.PredictedTTFTMs, l.ratio...)
	}
	if e.TTFTTargetMs > 0 {
		met := 0
		if e.TTFTMs <= e.TTFTTargetMs {
			met = 1
		}
		o.slo.Add(ctx, 1, l.met[met]...)
	}
}

// dropPool forgets a pool's labels.
func (o *predObs) dropPool(name string) {
	o.mu.Lock()
	for k := range o.labels {
		if k[0] == name {
			delete(o.labels, k)
		}
	}
	o.mu.Unlock()
}
