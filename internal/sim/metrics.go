package sim

import (
	"maps"
	"time"

	"github.com/prefixroute/prefixroute/internal/calib"
	"github.com/prefixroute/prefixroute/scheduler"
)

// Record is what happened to one served (or rejected) request.
type Record struct {
	ID         uint64
	Arrival    time.Duration
	TTFT       time.Duration // first token - arrival
	Wait       time.Duration // batch start - arrival
	Instance   int32
	Deployment int16
	Class      int16
	Router     int16
	// Prompt tokens requested, hit in the instance's cache, hit as the
	// router predicted it, and recomputed although another instance held
	// them (see Second.Recomputed).
	Prompt, Hit, Predicted, Recomputed uint32
	// OwnMs is the request's own uncached tokens at its instance's
	// throughput (no overhead), ms. Best is the instance of its deployment
	// that was best in hindsight when it was queued: the lowest EstMs of
	// the instance's exact queue then (running batch, queued uncached
	// tokens and overheads) plus the request's own uncached prefill there,
	// by the real caches; ChosenEstMs and BestEstMs are those estimates.
	OwnMs, ChosenEstMs, BestEstMs float32
	Best                          int32
	// PredictedMs is the router's predicted TTFT of its choice (0 for
	// baselines), TargetMs the request's target (0: none), ms.
	PredictedMs, TargetMs float32
	// PredictedQueueMs is the part of PredictedMs the router priced as
	// queued ahead (the decision's queue_ms; 0 for baselines), ms: compare
	// it with AheadMs, the queue the request really joined.
	PredictedQueueMs float32
	// Routed is the time from arrival to queueing on the instance: a live
	// run's Pick round trip and scheduling, a replayed RouteDelays entry,
	// else 0.
	Routed time.Duration
	// AheadMs is the instance's exact queue when the request joined it
	// (running batch and queued prefill work with their overheads), ms:
	// the load a dispatch was admitted onto.
	AheadMs float32
}

// WeightChange is one step of the weight schedule as it fired.
type WeightChange struct {
	At      time.Duration
	Weights map[string]float64
}

// InstanceStats are one instance's totals.
type InstanceStats struct {
	ID, Deployment             string
	Requests, Prefilled, Hit   uint64
	Batches                    uint64
	CacheBlocks, CacheCapacity int
	// PeakKVUsage is the most KV blocks its running and decoding requests
	// held at once, over its capacity (above 1: the simulated engine does
	// not refuse work for KV).
	PeakKVUsage float64
}

// Result is everything one run measured. It is a plain value once Run has
// returned; reading it from several goroutines is safe.
type Result struct {
	Scenario       string
	Variant        Variant
	Policy         scheduler.Policy
	CacheEvents    bool
	Routers        int
	ReportInterval time.Duration
	Deployments    []string
	Classes        []string // workload class names, by Record.Class
	Instances      []InstanceStats
	// Records are the served requests in the order of their first token;
	// Rejected the requests no router could place.
	Records   []Record
	Rejected  []Record
	Generated int
	// QueueMs and Waiting are sampled at the end of every virtual second,
	// per instance: the instance's own queue estimate and its queued
	// requests.
	QueueMs [][]float64
	Waiting [][]int32
	// Busy is each instance's prefill busy fraction in every virtual
	// second.
	Busy     [][]float64
	Changes  []WeightChange
	Duration time.Duration
	Warmup   time.Duration
	Smooth   time.Duration
	Focus    string
	Wall     time.Duration
	Live     *LiveStats
	// Readiness is the readiness probe's estimate and the measurement
	// after the cutover; nil without a probe (or when the run ended
	// before it).
	Readiness *ReadinessResult
	// Contended is, by class, the prompt tokens dispatched from a
	// router's queue while every class had a pick waiting in that queue
	// (on_saturation: queue; nil otherwise): the split of capacity
	// between backlogged flows.
	Contended []uint64
	// Fits are the (first) router's fits at the end of an outcomes variant's run
	// (Variant.Outcomes), by deployment; nil otherwise.
	Fits []calib.DeploymentStatus
}

// collector gathers a run's metrics. Not safe for concurrent use.
type collector struct {
	res       Result
	generated int
	busy      []time.Duration // instances' busy time at the last sample
}

func newCollector(rc *runConfig, insts []*Instance, end time.Duration) *collector {
	sc := rc.sc
	c := &collector{res: Result{Scenario: sc.Name, Variant: rc.variant, Policy: rc.policy, CacheEvents: rc.cacheEvents,
		Routers: rc.routers, ReportInterval: rc.reportInterval, Duration: end, Warmup: sc.Warmup.D(),
		Smooth: sc.Smooth.D(), Focus: sc.Focus}}
	if rc.variant.Baseline() {
		c.res.CacheEvents = false
	}
	for _, d := range sc.Deployments {
		c.res.Deployments = append(c.res.Deployments, d.Name)
	}
	for _, cl := range sc.Workload.Classes {
		c.res.Classes = append(c.res.Classes, cl.Name)
	}
	for _, in := range insts {
		c.res.Instances = append(c.res.Instances, InstanceStats{ID: in.ID, Deployment: sc.Deployments[in.Deployment].Name})
	}
	return c
}

func (c *collector) record(r *Request, in *Instance) Record {
	rec := Record{ID: r.ID, Arrival: r.Arrival, Class: int16(r.Class), Router: int16(r.Router), Prompt: r.PromptTokens,
		Instance: -1, Deployment: -1, TargetMs: float32(r.TargetMs)}
	if in != nil {
		rec.TTFT, rec.Wait = r.FirstToken-r.Arrival, r.Start-r.Arrival
		rec.Instance, rec.Deployment = int32(r.Instance), int16(in.Deployment)
		rec.Hit, rec.Predicted, rec.Recomputed = r.HitTokens, r.PredictedHit, r.Recomputed
		rec.OwnMs, rec.ChosenEstMs, rec.BestEstMs, rec.Best = r.ownMs, r.estChosen, r.estBest, r.best
		rec.Routed = r.queued - r.Arrival
		rec.AheadMs = r.aheadMs
		rec.PredictedMs, rec.PredictedQueueMs = float32(r.PredictedMs), float32(r.PredictedQueueMs)
	}
	return rec
}

func (c *collector) served(r *Request, in *Instance) {
	c.res.Records = append(c.res.Records, c.record(r, in))
}

// contended counts r's prompt tokens in Result.Contended (n classes).
func (c *collector) contended(n int, r *Request) {
	if c.res.Contended == nil {
		c.res.Contended = make([]uint64, n)
	}
	c.res.Contended[r.Class] += uint64(r.PromptTokens)
}

func (c *collector) reject(r *Request) { c.res.Rejected = append(c.res.Rejected, c.record(r, nil)) }

func (c *collector) weightChange(at time.Duration, w map[string]float64) {
	c.res.Changes = append(c.res.Changes, WeightChange{At: at, Weights: maps.Clone(w)})
}

func (c *collector) sample(now time.Duration, insts []*Instance) {
	q := make([]float64, len(insts))
	n := make([]int32, len(insts))
	for i, in := range insts {
		q[i], n[i] = in.queueMs(now), int32(in.waiting())
	}
	c.res.QueueMs = append(c.res.QueueMs, q)
	c.res.Waiting = append(c.res.Waiting, n)
	if c.busy == nil {
		c.busy = make([]time.Duration, len(insts))
	}
	b := make([]float64, len(insts))
	for i, in := range insts {
		t := in.busyAt(now)
		b[i] = float64(t-c.busy[i]) / float64(time.Second)
		c.busy[i] = t
	}
	c.res.Busy = append(c.res.Busy, b)
}

// result finishes the run's Result.
func (e *engine) result(wall time.Duration) *Result {
	res := &e.m.res
	res.Generated = e.m.generated
	res.Wall = wall
	for i, in := range e.insts {
		st := &res.Instances[i]
		st.Requests, st.Prefilled, st.Hit, st.Batches = in.Requests, in.Prefilled, in.Hit, in.Batches
		st.CacheBlocks, st.CacheCapacity = in.cache.Len(), in.cache.Capacity()
		st.PeakKVUsage = float64(in.peakBlocks) / float64(in.cache.Capacity())
	}
	for _, r := range e.routers {
		if sr, ok := r.(*stateRouter); ok && sr.learn != nil {
			res.Fits = sr.learn.book.Pool(sr.learn.pol)
			break
		}
	}
	if e.pr != nil {
		res.Readiness = e.pr.result(res)
	}
	return res
}

// percentile returns the nearest-rank p-quantile (0 < p <= 1) of sorted
// values, 0 for none.
func percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	k := int(float64(len(sorted))*p+0.999999999) - 1
	return sorted[min(max(k, 0), len(sorted)-1)]
}
