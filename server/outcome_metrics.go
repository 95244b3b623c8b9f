package server

import (
	"context"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
)

// numOutcomeStatuses bounds the OutcomeStatus values counted (UNSPECIFIED
// is refused before counting).
const numOutcomeStatuses = 6

// ttftBuckets are the bucket boundaries of prefixroute_outcome_ttft_seconds:
// 10 ms to 60 s.
var ttftBuckets = []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}

// outcomeObs counts gateways' outcomes per pool and status
// (prefixroute_outcomes) and records their ttft (prefixroute_outcome_ttft).
// Attribute options are precomputed per pool so that a call allocates
// nothing of its own. Pools come from the registry (callers pass "" for a
// pool it does not know), so clients cannot create label values. Safe for
// concurrent use; a nil *outcomeObs records nothing.
type outcomeObs struct {
	counter metric.Int64Counter
	ttft    metric.Float64Histogram
	mu      sync.RWMutex
	pools   map[string]*outcomePoolObs
	pred    *predObs // the prediction and target metrics (outcome_calib.go)
}

type outcomePoolObs struct {
	status [numOutcomeStatuses][]metric.AddOption // {pool, status}
	ttft   []metric.RecordOption                  // {pool}
}

func newOutcomeObs(m metric.Meter) (*outcomeObs, error) {
	c, err := m.Int64Counter("prefixroute_outcomes", metric.WithUnit("{outcome}"),
		metric.WithDescription("Outcomes of picked requests reported by gateways (PickService.ReportOutcome, POST /v1/outcome, ext_proc), by pool and status: served, connect_failed (excludes the instance as unreachable for 5 s), upstream_error, timeout, cancelled. Pool \"\" counts outcomes of pools the router does not know."))
	if err != nil {
		return nil, err
	}
	h, err := m.Float64Histogram("prefixroute_outcome_ttft", metric.WithUnit("s"),
		metric.WithDescription("Time to first token reported with outcomes (ttft_ms): from sending the request to the instance to the first response body byte, by pool."),
		metric.WithExplicitBucketBoundaries(ttftBuckets...))
	if err != nil {
		return nil, err
	}
	pred, err := newPredObs(m)
	if err != nil {
		return nil, err
	}
	return &outcomeObs{counter: c, ttft: h, pools: make(map[string]*outcomePoolObs), pred: pred}, nil
}

func (o *outcomeObs) pool(name string) *outcomePoolObs {
	o.mu.RLock()
	p := o.pools[name]
	o.mu.RUnlock()
	if p != nil {
		return p
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if p = o.pools[name]; p == nil {
		pa := attribute.String("pool", name)
		p = &outcomePoolObs{ttft: []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(pa))}}
		for st := range numOutcomeStatuses {
			p.status[st] = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(pa, attribute.String("status", statusLabel(pb.OutcomeStatus(st)))))}
		}
		o.pools[name] = p
	}
	return p
}

// statusLabel is the metric and JSON name of a status: "served",
// "connect_failed", ...
func statusLabel(st pb.OutcomeStatus) string {
	switch st {
	case pb.OutcomeStatus_OUTCOME_STATUS_SERVED:
		return "served"
	case pb.OutcomeStatus_OUTCOME_STATUS_CONNECT_FAILED:
		return "connect_failed"
	case pb.OutcomeStatus_OUTCOME_STATUS_UPSTREAM_ERROR:
		return "upstream_error"
	case pb.OutcomeStatus_OUTCOME_STATUS_TIMEOUT:
		return "timeout"
	case pb.OutcomeStatus_OUTCOME_STATUS_CANCELLED:
		return "cancelled"
	}
	return "unspecified"
}

// count records a run of validated outcomes of one pool: one counter add
// per status present, one histogram record per ttft.
func (o *outcomeObs) count(ctx context.Context, pool string, run []*pb.Outcome) {
	if o == nil {
		return
	}
	p := o.pool(pool)
	var n [numOutcomeStatuses]int64
	for _, out := range run {
		if st := int(out.GetStatus()); st < numOutcomeStatuses {
			n[st]++
		}
		if out.TtftMs != nil {
			o.ttft.Record(ctx, *out.TtftMs/1000, p.ttft...)
		}
	}
	for st, c := range n {
		if c > 0 {
			o.counter.Add(ctx, c, p.status[st]...)
		}
	}
}

// dropPool forgets a pool the registry dropped.
func (o *outcomeObs) dropPool(name string) {
	if o == nil {
		return
	}
	o.mu.Lock()
	delete(o.pools, name)
	o.mu.Unlock()
	o.pred.dropPool(name)
}

// predicted records a served outcome's ttft against its pick's
// prediction and target (predObs).
func (o *outcomeObs) predicted(ctx context.Context, e *PickOutcome) {
	if o == nil {
		return
	}
	o.pred.record(ctx, e)
}
