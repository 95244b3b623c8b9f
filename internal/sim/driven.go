package sim

import (
	"fmt"
	"io"
	"time"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/internal/state"
)

// DrivenOptions configures NewDriven. Zero fields keep the scenario's.
type DrivenOptions struct {
	// Pool replaces the scenario's pool name.
	Pool string
	// Duration bounds the arrivals, in virtual time; never more than the
	// scenario's duration.
	Duration time.Duration
	// MaxRequests bounds the requests generated; 0: no bound.
	MaxRequests int
	// Seed replaces the scenario's seed when non-zero (the workload's).
	Seed uint64
	// Progress is called once per virtual second, as for Run.
	Progress func(done, total time.Duration)
}

// Driven is one variant's emulated fleet, workload and weight schedule
// without a router: a loop outside the package (internal/simlive, which
// routes through a real prefixrouted) moves its clock, routes each arrival
// it is handed and queues the request on the chosen instance. Its events
// (batches, decodes, weight steps, the per-second samples) fire as in Run;
// no reports are sent. Not safe for concurrent use: the driving loop owns
// it (its Local router is).
type Driven struct {
	e     *engine
	rc    *runConfig
	local *LocalRouter // a baseline variant's picker; nil for a router variant
}

// DrivenInstance names one emulated instance.
type DrivenInstance struct {
	ID, Deployment string
}

// NewDriven builds variant's fleet and workload for a driving loop. A
// simulator baseline is driven with its picker in the loop's process
// (Local); a formula-only variant (optimistic: false) cannot be driven:
// only the simulator's own router can be that. Close releases the
// workload.
func NewDriven(sc *Scenario, variant string, opts DrivenOptions) (*Driven, error) {
	rc, err := sc.variantConfig(variant)
	if err != nil {
		return nil, err
	}
	if o := rc.variant.Optimistic; o != nil && !*o {
		return nil, fmt.Errorf("variant %q is formula-only (optimistic: false), which only the simulator's router can be", variant)
	}
	if opts.Pool != "" {
		scc := *sc
		scc.Pool = opts.Pool
		rc.sc = &scc
	}
	virtual := sc.Duration.D()
	if opts.Duration > 0 {
		virtual = min(virtual, opts.Duration)
	}
	e, err := newEngine(rc, RunOptions{Duration: virtual, Progress: opts.Progress, Seed: opts.Seed}, true)
	if err != nil {
		return nil, err
	}
	if opts.MaxRequests > 0 {
		e.wl = &limited{Workload: e.wl, left: opts.MaxRequests}
	}
	d := &Driven{e: e, rc: rc}
	if rc.variant.Baseline() {
		seed := sc.Seed
		if opts.Seed != 0 {
			seed = opts.Seed
		}
		d.local = newLocalRouter(rc, e.insts, seed)
	}
	return d, nil
}

// Close closes the workload when it holds a file.
func (d *Driven) Close() error {
	if c, ok := d.e.wl.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

// Pool is the pool name the run uses.
func (d *Driven) Pool() string { return d.rc.sc.Pool }

// BlockTokens is the scenario's block size in tokens.
func (d *Driven) BlockTokens() int { return d.rc.sc.BlockTokens }

// PolicyProto is the variant's policy as a SetPolicy message for a router
// whose clock runs speed times slower than the simulation's: every
// parameter in ms divided by speed, every throughput multiplied.
func (d *Driven) PolicyProto(speed float64) *pb.Policy { return policyProto(d.rc.policy, speed) }

// Outcomes reports whether the variant's gateway reports every request's
// TTFT to its router (Variant.Outcomes).
func (d *Driven) Outcomes() bool { return d.rc.variant.Outcomes }

// CacheEvents reports whether the variant's instances send cache events.
func (d *Driven) CacheEvents() bool { return d.rc.cacheEvents }

// ReportInterval is the variant's report interval, in virtual time.
func (d *Driven) ReportInterval() time.Duration { return d.rc.reportInterval }

// FirstWeights is the weight step in force at time 0.
func (d *Driven) FirstWeights() map[string]float64 { return d.rc.weights[0].Weights }

// Instances lists the emulated instances in index order.
func (d *Driven) Instances() []DrivenInstance {
	out := make([]DrivenInstance, len(d.e.insts))
	for k, in := range d.e.insts {
		out[k] = DrivenInstance{ID: in.ID, Deployment: d.rc.sc.Deployments[in.Deployment].Name}
	}
	return out
}

// OnWeights makes every later weight step call f (with the step's
// version) before it is recorded; f's error ends the run.
func (d *Driven) OnWeights(f func(w map[string]float64, version uint64) error) { d.e.onWeights = f }

// OnArrival makes every arrival go to f, which must route the request and
// hand it back through Queue or Reject.
func (d *Driven) OnArrival(f func(r *Request)) { d.e.route = f }

// OnServed makes every request's first token call f (at its virtual
// time, from the driving loop), after it is recorded: a live gateway's
// outcome (Variant.Outcomes) goes back to the router from there.
func (d *Driven) OnServed(f func(r *Request)) { d.e.onServed = f }

// Start schedules the first events and the first arrival.
func (d *Driven) Start() error { return d.e.start() }

// Now is the virtual clock.
func (d *Driven) Now() time.Duration { return d.e.now }

// Next returns the time of the next event; false when none is left.
func (d *Driven) Next() (time.Duration, bool) { return d.e.q.peek() }

// AdvanceTo fires every event due at or before now, then moves the clock
// to now (it never goes back).
func (d *Driven) AdvanceTo(now time.Duration) error {
	for {
		at, ok := d.e.q.peek()
		if !ok || at > now {
			break
		}
		if err := d.e.handle(d.e.q.pop()); err != nil {
			return err
		}
	}
	d.e.now = max(d.e.now, now)
	return nil
}

// Report fills rep with instance k's load and the cache events since its
// last report, as its Reporter sends them.
func (d *Driven) Report(k int, rep *state.Report) { d.e.insts[k].report(d.e.now, rep) }

// Queue queues r on instance k now, the instance its router chose.
func (d *Driven) Queue(k int, r *Request) { d.e.enqueue(k, r) }

// Reject records r as refused by its router.
func (d *Driven) Reject(r *Request) { d.e.m.reject(r) }

// Unfinished is the number of requests generated but neither served nor
// rejected yet.
func (d *Driven) Unfinished() int {
	return d.e.m.generated - len(d.e.m.res.Records) - len(d.e.m.res.Rejected)
}

// Result returns what the run measured, wall being its wall-clock time.
func (d *Driven) Result(wall time.Duration) *Result { return d.e.result(wall) }

// limited ends a workload after a number of requests.
type limited struct {
	Workload
	left int
}

func (l *limited) Next() (*Request, error) {
	if l.left <= 0 {
		return nil, nil
	}
	l.left--
	return l.Workload.Next()
}

// LiveStats is what a live run (internal/simlive) measured on the gRPC
// side; Result.Live holds it. A plain value.
type LiveStats struct {
	Addr                          string
	Speed                         float64
	Picks, PickErrors             int
	FirstError                    string
	PickP50Ms, PickP99Ms, PickMax float64
	// RouteP50Ms and RouteP99Ms are the time from a request's arrival to
	// its queueing on the chosen instance (Pick's round trip, the gateway
	// worker's and the loop's scheduling), in virtual ms: what a live TTFT
	// holds that a simulated one does not.
	RouteP50Ms, RouteP99Ms       float64
	Reports, Acks, ReportStreams uint64
	// Unfinished counts requests still queued or in a Pick call when the
	// run stopped at its deadline.
	Unfinished int
	// Shed counts picks the router refused for load (RESOURCE_EXHAUSTED:
	// a TTFT target no instance could meet under on_slo_miss shed, or
	// saturation under on_saturation shed), ShedSLO those with the reason
	// SLO_UNATTAINABLE; neither is in PickErrors.
	Shed, ShedSLO int
	// Outcomes is set when the variant reports outcomes (outcomes: true).
	Outcomes *LiveOutcomes
}

// LiveOutcomes is what a live variant with outcomes: true sent back
// through ReportOutcome and what the router's calibration made of it. A
// plain value.
type LiveOutcomes struct {
	// Sent, Dropped and Failed are the outcome reporters' counts.
	Sent, Dropped, Failed uint64
	// Fits are the router's per-deployment fits after the run
	// (AdminService.GetSloCalibration of the first replica).
	Fits []LiveFit
}

// LiveFit is one deployment's prefill fit as the router reported it.
type LiveFit struct {
	Deployment                          string
	Version, Accepted, Ignored, Clipped uint64
	PrefillScale, DoublingContextTokens float64
	InUse                               bool
}

// Percentile is the p-quantile (0..1) of sorted, by the nearest rank; 0
// when sorted is empty.
func Percentile(sorted []float64, p float64) float64 { return percentile(sorted, p) }
