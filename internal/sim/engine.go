package sim

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/prefixroute/prefixroute/internal/state"
	"github.com/prefixroute/prefixroute/scheduler"
)

// RunOptions adjusts one run. The zero value runs the scenario as written.
type RunOptions struct {
	// Seed replaces the scenario's seed when non-zero.
	Seed uint64
	// Duration replaces the scenario's duration when non-zero (the weight
	// schedule is kept; steps past the end never fire).
	Duration time.Duration
	// Workload replaces the scenario's workload (tests, or a trace opened
	// elsewhere).
	Workload Workload
	// Progress, when set, is called once per virtual second with the
	// virtual time reached and the run's duration.
	Progress func(done, total time.Duration)
	// RouteDelays, by request id, delay a request's queueing on the
	// instance its router chose at arrival (the decision and the router's
	// accounting stay at arrival): a live run's measured arrival-to-queued
	// times (Record.Routed), replayed to tell the router's real latency
	// apart from the model. Missing ids are queued at once.
	RouteDelays map[uint64]time.Duration
	// LiveDraws makes the router draw as prefixrouted does in a live run:
	// each pick's RNG seeded with the request id + 1, the seed live gateway
	// workers send. With RouteDelays it replays a live run's randomness too.
	LiveDraws bool
}

// engine is one run of one variant: the event loop, the fleet, the routers
// and the metrics. Not safe for concurrent use.
type engine struct {
	rc      *runConfig
	opts    RunOptions
	end     time.Duration
	q       eventQueue
	now     time.Duration
	insts   []*Instance
	routers []router
	wl      Workload
	m       *collector
	rep     state.Report
	nextR   int
	live    bool             // live mode: no report events, arrivals go to route
	route   func(r *Request) // live mode: hands an arrival to the gateway workers
	// onServed, when set (live mode), is told of every first token.
	onServed func(r *Request)
	// onWeights, when set (live mode), publishes a weight step elsewhere.
	onWeights func(w map[string]float64, version uint64) error
	// pr is the readiness probe (nil: none, a baseline, or live mode).
	pr *probe
	// queues are the routers' waiting rooms (on_saturation: queue or a
	// gate; nil otherwise), lastLoad the instances' latest reports for
	// the gate (flow.go).
	queues   []*simQueue
	lastLoad []state.Report
}

// newEngine builds the fleet (and, unless live, the routers) for rc.
func newEngine(rc *runConfig, opts RunOptions, live bool) (*engine, error) {
	sc := rc.sc
	e := &engine{rc: rc, opts: opts, end: sc.Duration.D(), live: live}
	if opts.Duration > 0 {
		e.end = opts.Duration
	}
	seed := sc.Seed
	if opts.Seed != 0 {
		seed = opts.Seed
	}
	fleet := make(map[uint64]int32)
	for d := range sc.Deployments {
		spec := &sc.Deployments[d]
		for k := range spec.Instances {
			id := fmt.Sprintf("%s-%02d", spec.Name, k)
			e.insts = append(e.insts, newInstance(id, d, spec, sc.BlockTokens, fleet, rc.cacheEvents))
		}
	}
	e.m = newCollector(rc, e.insts, e.end)
	e.wl = opts.Workload
	if e.wl == nil {
		var err error
		if e.wl, err = NewWorkload(sc, seed); err != nil {
			return nil, err
		}
	}
	if live {
		return e, nil
	}
	for k := range rc.routers {
		var r router
		rseed := seed ^ uint64(k+1)*0x9e3779b97f4a7c15
		switch {
		case rc.variant.Picker == "llmd":
			r = newLLMD(rc, e.insts, rseed)
		case rc.variant.Baseline():
			r = newBaseline(rc, e.insts, rseed)
		default:
			sr, err := newStateRouter(rc, e.insts, rseed)
			if err != nil {
				return nil, err
			}
			sr.liveDraws = opts.LiveDraws
			if k == 0 && rc.probe != nil {
				e.pr = newProbe(rc, e.insts)
				sr.onPick = e.pr.pick
			}
			r = sr
		}
		e.routers = append(e.routers, r)
	}
	e.queues = newQueues(rc)
	return e, nil
}

// newVirtualEngine is newEngine for a virtual-time run, with the function
// that closes the workload the engine opened (a trace file; a no-op when
// the caller gave opts.Workload or the workload holds nothing open).
func newVirtualEngine(rc *runConfig, opts RunOptions) (*engine, func(), error) {
	e, err := newEngine(rc, opts, false)
	if err != nil {
		return nil, nil, err
	}
	if c, ok := e.wl.(io.Closer); ok && opts.Workload == nil {
		return e, func() { c.Close() }, nil
	}
	return e, func() {}, nil
}

// Run simulates one variant of a scenario in virtual time and returns what
// happened. Runs are deterministic: the same scenario, variant and seed give
// the same Result (Wall aside). Every variant of a scenario sees the same
// requests at the same times. Run is safe for concurrent use on a shared
// Scenario.
func Run(sc *Scenario, variant string, opts RunOptions) (*Result, error) {
	rc, err := sc.variantConfig(variant)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	e, closeWorkload, err := newVirtualEngine(rc, opts)
	if err != nil {
		return nil, err
	}
	defer closeWorkload()
	if err := e.start(); err != nil {
		return nil, err
	}
	for e.q.Len() > 0 {
		if err := e.handle(e.q.pop()); err != nil {
			return nil, err
		}
	}
	return e.result(time.Since(start)), nil
}

// variantConfig resolves the named variant.
func (sc *Scenario) variantConfig(name string) (*runConfig, error) {
	for i := range sc.Variants {
		if sc.Variants[i].Name == name {
			return sc.resolve(&sc.Variants[i])
		}
	}
	return nil, fmt.Errorf("scenario %s has no variant %q", sc.Name, name)
}

// start applies the first reports and schedules the first events.
func (e *engine) start() error {
	if !e.live {
		for k := range e.insts {
			if err := e.reportNow(k); err != nil {
				return err
			}
			phase := e.rc.reportInterval * time.Duration(k+1) / time.Duration(len(e.insts))
			e.q.push(event{at: phase, kind: evReport, inst: int32(k)})
		}
	}
	for i := 1; i < len(e.rc.weights) && e.rc.weights[i].At.D() < e.end; i++ {
		e.q.push(event{at: e.rc.weights[i].At.D(), kind: evWeights, inst: int32(i)})
	}
	e.m.weightChange(0, e.rc.weights[0].Weights)
	if e.pr != nil && e.pr.cfg.at < e.end {
		e.q.push(event{at: e.pr.cfg.at, kind: evProbe})
	}
	e.q.push(event{at: time.Second, kind: evTick})
	return e.nextArrival()
}

func (e *engine) nextArrival() error {
	r, err := e.wl.Next()
	if err != nil || r == nil || r.Arrival >= e.end {
		return err
	}
	e.m.generated++
	e.q.push(event{at: r.Arrival, kind: evArrival, req: r})
	return nil
}

// handle fires one event.
func (e *engine) handle(ev event) error {
	e.now = ev.at
	switch ev.kind {
	case evArrival:
		if e.live {
			e.route(ev.req)
		} else if err := e.dispatch(ev.req); err != nil {
			return err
		}
		return e.nextArrival()
	case evBatchDone:
		e.batchDone(int(ev.inst))
	case evDecodeDone:
		e.insts[ev.inst].decodeDone(ev.req)
	case evQueued:
		e.enqueue(int(ev.inst), ev.req)
	case evReport:
		if err := e.reportNow(int(ev.inst)); err != nil {
			return err
		}
		if err := e.release(); err != nil {
			return err
		}
		if next := ev.at + e.rc.reportInterval; next < e.end {
			e.q.push(event{at: next, kind: evReport, inst: ev.inst})
		}
	case evWeights:
		st := e.rc.weights[ev.inst]
		for _, r := range e.routers {
			r.setWeights(st.Weights, uint64(ev.inst)+1)
		}
		if e.onWeights != nil {
			if err := e.onWeights(st.Weights, uint64(ev.inst)+1); err != nil {
				return err
			}
		}
		e.m.weightChange(ev.at, st.Weights)
		if e.pr != nil && e.pr.fired && int(ev.inst) == e.pr.cfg.cutStep {
			e.pr.cutover(e.insts)
		}
	case evProbe:
		if err := e.pr.fire(e.now, e.routers[0].(*stateRouter).pool); err != nil {
			return err
		}
	case evTick:
		e.m.sample(ev.at, e.insts)
		if e.opts.Progress != nil {
			e.opts.Progress(ev.at, e.end)
		}
		if next := ev.at + time.Second; next <= e.end {
			e.q.push(event{at: next, kind: evTick})
		}
	}
	return nil
}

// dispatch routes r through the next router replica and queues it.
func (e *engine) dispatch(r *Request) error {
	r.Router = e.nextR
	e.nextR = (e.nextR + 1) % len(e.routers)
	r.TargetMs = e.rc.sc.Workload.TTFTSLOMs
	var sq *simQueue
	if e.queues != nil {
		sq = e.queues[r.Router]
		if sq.q.Len() > 0 || e.gateClosed() { // FCFS behind those waiting
			e.hold(sq, r)
			return nil
		}
	}
	k, err := e.routers[r.Router].pick(e.now, r)
	if err != nil {
		switch {
		case errors.Is(err, scheduler.ErrSaturated) && sq != nil:
			e.hold(sq, r)
			return nil
		case errors.Is(err, scheduler.ErrNoEligibleInstance) || errors.Is(err, scheduler.ErrAllWeightsZero) ||
			errors.Is(err, scheduler.ErrSLOUnattainable) || errors.Is(err, scheduler.ErrSaturated): // shed
			e.m.reject(r)
			return nil
		}
		return fmt.Errorf("pick of request %d at %v: %w", r.ID, e.now, err)
	}
	e.place(k, r)
	return nil
}

// place queues r on instance k, after its route delay or its router's
// dispatch hold, whichever is longer (a live run's route delay includes
// the hold).
func (e *engine) place(k int, r *Request) {
	if d := max(e.opts.RouteDelays[r.ID], r.Hold); d > 0 {
		e.q.push(event{at: e.now + d, kind: evQueued, inst: int32(k), req: r})
		return
	}
	e.enqueue(k, r)
}

// enqueue queues r on instance k, starting a batch when it is idle.
func (e *engine) enqueue(k int, r *Request) {
	r.Instance, r.queued = k, e.now
	e.hindsight(k, r)
	if e.insts[k].enqueue(r) {
		e.startBatch(k)
	}
}

// hindsight sets r's best instance of k's deployment in hindsight at now
// and the estimates (Record.Best): each instance's exact queue (the running
// batch's rest and the queued prefill work with their overheads) plus
// r's own prefill there by its real cache. FCFS means later arrivals do not
// delay r, so this is r's TTFT there up to batching.
func (e *engine) hindsight(k int, r *Request) {
	est := func(in *Instance) float64 {
		u := uncached(r.PromptTokens, in.cache.Match(r.Hashes), in.bs)
		w := scheduler.PrefillWork(u, r.PromptTokens-u, in.doubling)
		return in.queueMs(e.now) + float64(in.prefillTime(w))/1e6
	}
	chosen := est(e.insts[k])
	r.aheadMs = float32(e.insts[k].queueMs(e.now))
	best, bestMs := k, chosen
	for j, in := range e.insts {
		if j == k || in.Deployment != e.insts[k].Deployment {
			continue
		}
		if v := est(in); v < bestMs {
			best, bestMs = j, v
		}
	}
	r.best, r.estChosen, r.estBest = int32(best), float32(chosen), float32(bestMs)
}

func (e *engine) startBatch(k int) {
	if end, ok := e.insts[k].startBatch(e.now); ok {
		e.q.push(event{at: end, kind: evBatchDone, inst: int32(k)})
		if e.pr != nil {
			e.pr.batch(e.now, e.insts[k])
		}
	}
}

func (e *engine) batchDone(k int) {
	in := e.insts[k]
	for _, r := range in.finishBatch(e.now) {
		e.m.served(r, in)
		if e.live {
			if e.onServed != nil {
				e.onServed(r)
			}
		} else if sr, ok := e.routers[r.Router].(*stateRouter); ok && sr.learn != nil {
			sr.learn.served(r)
		}
		if d := in.decodeTime(r); d > 0 {
			e.q.push(event{at: e.now + d, kind: evDecodeDone, inst: int32(k), req: r})
		} else {
			in.decodeDone(r)
		}
	}
	e.startBatch(k)
}

// reportNow sends instance k's load to every router.
func (e *engine) reportNow(k int) error {
	e.insts[k].report(e.now, &e.rep)
	e.noteLoad(k, &e.rep)
	for _, r := range e.routers {
		if err := r.report(e.now, k, &e.rep); err != nil {
			return fmt.Errorf("report of %s at %v: %w", e.insts[k].ID, e.now, err)
		}
	}
	return nil
}
