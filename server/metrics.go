package server

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/prefixroute/prefixroute/internal/decisionlog"
	"github.com/prefixroute/prefixroute/internal/state"
	"github.com/prefixroute/prefixroute/scheduler"
)

// outcome is the outcome label of prefixroute_picks_total.
type outcome uint8

// The outcomes of a Pick, by the status code it returned.
const (
	outcomeOK              outcome = iota // OK
	outcomeUnavailable                    // Unavailable: no instance reported, or none eligible
	outcomeDrained                        // FailedPrecondition: only weight-0 deployments are eligible
	outcomeInvalid                        // InvalidArgument
	outcomeUnknownPool                    // NotFound
	outcomeCanceled                       // Canceled or DeadlineExceeded
	outcomeError                          // any other code (Internal after a panic, ...)
	outcomeSaturated                      // ResourceExhausted from the scheduler: every live instance saturated, shed
	outcomeSLOUnattainable                // ResourceExhausted from the scheduler: no instance meets the TTFT target, shed
	numOutcomes
)

var outcomeNames = [numOutcomes]string{"ok", "unavailable", "drained", "invalid", "unknown_pool", "canceled", "error", "saturated", "slo_unattainable"}

func outcomeOf(c codes.Code) outcome {
	switch c {
	case codes.OK:
		return outcomeOK
	case codes.Unavailable:
		return outcomeUnavailable
	case codes.FailedPrecondition:
		return outcomeDrained
	case codes.InvalidArgument:
		return outcomeInvalid
	case codes.NotFound:
		return outcomeUnknownPool
	case codes.Canceled, codes.DeadlineExceeded:
		return outcomeCanceled
	}
	return outcomeError
}

// latencyBuckets are the bucket boundaries of prefixroute_pick_duration_seconds:
// 5µs to 1s, about three per decade.
var latencyBuckets = []float64{
	5e-6, 10e-6, 25e-6, 50e-6, 100e-6, 250e-6, 500e-6,
	1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3, 50e-3, 100e-3, 250e-3, 500e-3, 1,
}

// observer records the router's own metrics and the Pick span's attributes.
// The hot-path methods (done, reported) look the pool and the
// deployment up in read-locked maps and count picks, blocks and reports in
// their atomics, which the scrape callback reads (metrics_state.go), so a
// call allocates nothing of its own and pays no attribute-set lookup. All methods are safe for
// concurrent use, and a nil *observer records nothing (a Server built
// without a Daemon).
type observer struct {
	now  func() time.Time
	reg  *state.Registry
	dlog *decisionlog.Log // nil when off

	panics  metric.Int64Counter
	latency metric.Float64Histogram

	mu    sync.RWMutex
	pools map[string]*poolObs
	rings ringBudget // of the console's history (history.go)
}

// poolObs is one pool's precomputed attribute options and deployments.
type poolObs struct {
	name      string
	latency   []metric.RecordOption                // {pool}
	failed    [numOutcomes]atomic.Int64            // failed picks by outcome (prefixroute_picks, deployment unset)
	excluded  [scheduler.NumReasons]atomic.Int64   // instances left out by reason (prefixroute_pick_excluded_instances)
	pd        [scheduler.NumPDReasons]atomic.Int64 // picks by prefill-stage outcome (prefixroute_pick_pd_decisions)
	takeovers [numTakeoverOutcomes]atomic.Int64    // report streams that took over an instance id (prefixroute_instance_takeovers)
	rings     *ringBudget                          // nil: no history rings for the pool's deployments
	fails     *failRing                            // failed picks and markers; nil without a ring

	mu   sync.RWMutex
	deps map[string]*depObs
}

// depObs is one deployment's precomputed attribute options, the eligible
// instances of the pool's latest decision, and its recent picks.
type depObs struct {
	name     string
	attrs    []metric.AddOption // {pool, deployment}
	eligible atomic.Int64       // -1 until a decision saw the deployment
	picks    atomic.Int64       // successful picks (prefixroute_picks, outcome ok)
	blocks   atomic.Int64       // their prefix blocks (prefixroute_pick_prefix_blocks)
	matched  atomic.Int64       // of those, cached on the chosen instance (prefixroute_pick_matched_blocks)
	reports  atomic.Int64       // load reports applied (prefixroute_reports)
	flaps    atomic.Int64       // report streams that replaced an open one (prefixroute_instance_identity_flaps)
	ring     pickRing           // recent picks: the traffic-share gauges and the console
}

// newObserver creates the instruments on meter m. Gauges are registered
// separately (registerGauges).
func newObserver(m metric.Meter, reg *state.Registry, now func() time.Time) (*observer, error) {
	o := &observer{now: now, reg: reg, pools: make(map[string]*poolObs)}
	var errs []error
	counter := func(name, unit, desc string) metric.Int64Counter {
		c, err := m.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return c
	}
	o.panics = counter("prefixroute_panics_recovered", "{panic}", "Panics in gRPC handlers turned into Internal by the recovery interceptor.")
	var err error
	o.latency, err = m.Float64Histogram("prefixroute_pick_duration", metric.WithUnit("s"),
		metric.WithDescription("Time the Pick handler took, from request decoded to response ready, by pool."),
		metric.WithExplicitBucketBoundaries(latencyBuckets...))
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	o.panics.Add(context.Background(), 0) // the series exists before the first panic
	return o, nil
}

// pool returns the pool's options, creating them on first use. A name the
// registry does not know shares the entry of "" so that clients cannot
// create label values.
func (o *observer) pool(name string) *poolObs {
	o.mu.RLock()
	p := o.pools[name]
	o.mu.RUnlock()
	if p != nil {
		return p
	}
	if name != "" {
		if _, err := o.reg.Pool(name); err != nil {
			return o.pool("")
		}
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if p = o.pools[name]; p == nil {
		p = newPoolObs(name)
		if name != "" && o.rings.take() {
			p.rings, p.fails = &o.rings, &failRing{}
		}
		o.pools[name] = p
	}
	return p
}

func newPoolObs(name string) *poolObs {
	pa := attribute.String("pool", name)
	p := &poolObs{name: name, deps: make(map[string]*depObs),
		latency: []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(pa))}}
	return p
}

// dep returns the deployment's options, creating them on first use.
// Deployment names come from the pool's own state, so they are bounded.
func (p *poolObs) dep(name string) *depObs {
	p.mu.RLock()
	d := p.deps[name]
	p.mu.RUnlock()
	if d != nil {
		return d
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if d = p.deps[name]; d == nil {
		pa, da := attribute.String("pool", p.name), attribute.String("deployment", name)
		d = &depObs{name: name, attrs: []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(pa, da))}}
		d.eligible.Store(-1)
		d.ring.init(p.rings != nil && p.rings.take())
		p.deps[name] = d
	}
	return d
}

// dropPool forgets a pool the registry dropped (Server.sweepOnce): its
// options, counters and history rings, whose slots go back to the budget.
func (o *observer) dropPool(name string) {
	if o == nil {
		return
	}
	o.mu.Lock()
	p := o.pools[name]
	delete(o.pools, name)
	o.mu.Unlock()
	if p == nil || p.rings == nil {
		return
	}
	n := int64(1) // the pool's failure ring
	p.mu.RLock()
	for _, d := range p.deps {
		if d.ring.history() {
			n++
		}
	}
	p.mu.RUnlock()
	p.rings.n.Add(-n)
}

// lookup returns the pool's options if any pick created them.
func (o *observer) lookup(name string) *poolObs {
	o.mu.RLock()
	defer o.mu.RUnlock()
	return o.pools[name]
}

// done records one finished Pick from its record: outcome and latency;
// for a decision worth auditing, exclusions by reason, eligible instances
// per deployment and, when it succeeded, the blocks, matched blocks and
// recent picks of the chosen deployment; the span's attributes; and, for
// a pick the decision log samples, its line. PickFor calls it once per
// pick.
func (o *observer) done(ctx context.Context, rec *pickRecord) {
	if o == nil {
		return
	}
	setSpan(ctx, rec)
	p := o.pool(rec.req.GetPool())
	o.latency.Record(ctx, rec.elapsed.Seconds(), p.latency...)
	oc := outcomeOf(status.Code(rec.err))
	if errors.Is(rec.decErr, scheduler.ErrSaturated) || errors.Is(rec.decErr, scheduler.ErrPrefillSaturated) {
		oc = outcomeSaturated // not another ResourceExhausted (a limit)
	} else if errors.Is(rec.decErr, scheduler.ErrSLOUnattainable) {
		oc = outcomeSLOUnattainable
	}
	if rec.pk != nil && (rec.decErr == nil || decisionExplains(rec.decErr)) {
		p.pd[rec.pk.Decision.PD.Reason].Add(1) // PDNone: not exported
	}
	if oc != outcomeOK || rec.resp.GetDeployment() == "" {
		p.failed[oc].Add(1)
		if p.fails != nil {
			p.fails.add(o.now().Unix(), oc)
		}
	} else {
		p.dep(rec.resp.GetDeployment()).picks.Add(1)
	}
	if rec.audited() {
		o.decided(ctx, p, rec)
	}
	if rec.logged {
		o.logDecision(ctx, rec)
	}
}

// logs reports whether the decision log samples the next pick (false for a
// nil observer or no decision log).
func (o *observer) logs() bool {
	return o != nil && o.dlog != nil && o.dlog.Sample()
}

// decided records what an audited decision shows.
func (o *observer) decided(ctx context.Context, p *poolObs, rec *pickRecord) {
	pk := rec.pk
	d := &pk.Decision
	for r, n := range d.Excluded {
		if n > 0 {
			p.excluded[r].Add(int64(n))
		}
	}
	for i := range d.Deployments {
		p.dep(pk.Snapshot.Deployments[i].Name).eligible.Store(int64(d.Deployments[i].Eligible))
	}
	if rec.decErr != nil {
		return
	}
	blocks := rec.blocks()
	dep := p.dep(pk.Snapshot.Deployments[d.Deployment].Name)
	hit := min(pk.Snapshot.Instances[d.Instance].MatchedBlocks, blocks)
	if blocks > 0 {
		dep.blocks.Add(int64(blocks))
		dep.matched.Add(int64(hit))
	}
	dep.ring.add(o.now().Unix(), uint64(blocks), uint64(hit), pk.Snapshot.Instances[d.Instance].ID)
}

// decisionExplains reports whether a failed decision carries the reasons
// worth recording: no eligible instance, every live one saturated (shed),
// or only weight-0 deployments. Each has the whole audit (scheduler.Decide).
func decisionExplains(err error) bool {
	return errors.Is(err, scheduler.ErrNoEligibleInstance) || errors.Is(err, scheduler.ErrSaturated) ||
		errors.Is(err, scheduler.ErrAllWeightsZero) || errors.Is(err, scheduler.ErrSLOUnattainable) ||
		errors.Is(err, scheduler.ErrNoPrefillInstance) || errors.Is(err, scheduler.ErrPrefillSaturated)
}

// identityFlap counts a report stream that took over an open one.
func (o *observer) identityFlap(pool, deployment string) {
	if o == nil {
		return
	}
	o.pool(pool).dep(deployment).flaps.Add(1)
}

// takeover counts a report stream's takeover of an existing instance id by
// outcome. The pool label is bounded as the pick metrics' are.
func (o *observer) takeover(pool string, outcome takeoverOutcome) {
	if o == nil {
		return
	}
	o.pool(pool).takeovers[outcome].Add(1)
}

// reporting returns the counters of a report stream's deployment, looked
// up once per stream (nil when o is nil). Safe for concurrent use.
func (o *observer) reporting(pool, deployment string) *depObs {
	if o == nil {
		return nil
	}
	return o.pool(pool).dep(deployment)
}

// reported counts one applied load report of d's deployment: an atomic
// add, read at scrape time (prefixroute_reports). Safe for concurrent use;
// no-op on nil.
func (d *depObs) reported() {
	if d != nil {
		d.reports.Add(1)
	}
}

// panicked counts one recovered panic.
func (o *observer) panicked(ctx context.Context) {
	if o != nil {
		o.panics.Add(ctx, 1)
	}
}
