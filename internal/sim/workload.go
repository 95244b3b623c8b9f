package sim

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/prefixroute/prefixroute/internal/calib"
	"github.com/prefixroute/prefixroute/scheduler"
)

// WorkloadSpec is the traffic of a scenario: synthetic (arrivals and
// classes) or a JSONL trace (see ReadTrace).
type WorkloadSpec struct {
	// Rate is the mean arrival rate in requests per second.
	Rate float64 `yaml:"rate"`
	// Arrivals is "poisson" (default) or "uniform" (one request every
	// 1/rate exactly).
	Arrivals string `yaml:"arrivals"`
	// RateSchedule changes the rate from each step's At on.
	RateSchedule []RateStep  `yaml:"rate_schedule"`
	Classes      []ClassSpec `yaml:"classes"`
	// Trace replays a JSONL trace instead (path relative to the scenario
	// file); Rate, Arrivals and Classes must then be empty.
	Trace string `yaml:"trace"`
	// TraceSpeed replays the trace that many times faster (its times are
	// divided by it). Default 1.
	TraceSpeed float64 `yaml:"trace_speed"`
	// TraceSpread spreads the trace's simultaneous requests over a window:
	// the k-th (from 0) of the n lines sharing a time t arrives at
	// t + TraceSpread*k/n instead of t. It is in the trace's own time, before
	// TraceSpeed divides it (3s at trace_speed 1.7 spreads a burst over
	// 1.76 s of the replay). Lines moved past later ones are replayed in
	// arrival order. Deterministic; 0 (the default) keeps the trace's
	// times. At most 1h; only with a trace.
	TraceSpread Duration `yaml:"trace_spread"`
	// TTFTSLOMs is every request's TTFT target in ms (PickRequest.ttft_slo_ms;
	// the policy's on_slo_miss decides what the router does when none can
	// meet it). 0: none. At most scheduler.MaxTTFTTargetMs.
	TTFTSLOMs float64 `yaml:"ttft_slo_ms"`
}

// MaxTraceSpread is the largest WorkloadSpec.TraceSpread.
const MaxTraceSpread = time.Hour

// RateStep sets the arrival rate from At on.
type RateStep struct {
	At   Duration `yaml:"at"`
	Rate float64  `yaml:"rate"`
}

// ClassSpec is one kind of request, drawn with probability Share (shares
// are normalised).
//
//   - kind "shared": a prefix group is drawn with Zipf(zipf) popularity
//     among Groups; the prompt is the group's prefix (PrefixTokens, drawn
//     once per group) followed by a unique suffix (SuffixTokens).
//   - kind "conversation": Conversations slots of multi-turn conversations;
//     each request is the next turn of a uniformly drawn slot. A
//     conversation starts with a system prompt of a prefix group (as for
//     "shared") and a first user message (SuffixTokens); each turn appends
//     the previous answer (OutputTokens) and a new user message
//     (UserTokens), so a turn extends the prompt of the turn before. After
//     Turns turns, or when the prompt would pass MaxPromptTokens, the slot
//     starts a new conversation.
type ClassSpec struct {
	Name            string  `yaml:"name"`
	Share           float64 `yaml:"share"`
	Kind            string  `yaml:"kind"`
	Groups          int     `yaml:"groups"`
	Zipf            float64 `yaml:"zipf"`
	PrefixTokens    Dist    `yaml:"prefix_tokens"`
	SuffixTokens    Dist    `yaml:"suffix_tokens"`
	OutputTokens    Dist    `yaml:"output_tokens"`
	Conversations   int     `yaml:"conversations"`
	Turns           Dist    `yaml:"turns"`
	UserTokens      Dist    `yaml:"user_tokens"`
	MaxPromptTokens int     `yaml:"max_prompt_tokens"`
	// Priority and Flow are the class's PickRequest.priority and flow_id
	// under on_saturation: queue (docs/flow-control.md). Default 0 and the
	// class's name.
	Priority int32  `yaml:"priority"`
	Flow     string `yaml:"flow"`
}

func (w *WorkloadSpec) validate() error {
	if t := w.TTFTSLOMs; t != 0 && !(t > 0 && t <= scheduler.MaxTTFTTargetMs) {
		return fmt.Errorf("ttft_slo_ms is %v: want 0 (none) or a number of ms in (0, %d]", t, scheduler.MaxTTFTTargetMs)
	}
	if d := w.TraceSpread; d < 0 || d > Duration(MaxTraceSpread) {
		return fmt.Errorf("trace_spread is %v: want a duration in [0, %v]", d, MaxTraceSpread)
	}
	if w.Trace != "" {
		if w.Rate != 0 || len(w.Classes) > 0 || len(w.RateSchedule) > 0 {
			return errors.New("trace replaces rate, rate_schedule and classes; give one or the other")
		}
		if w.TraceSpeed < 0 || math.IsInf(w.TraceSpeed, 0) || math.IsNaN(w.TraceSpeed) {
			return errors.New("trace_speed must be a finite number > 0 (0: 1)")
		}
		return nil
	}
	if w.TraceSpread != 0 {
		return errors.New("trace_spread spreads a trace's simultaneous lines: it needs a trace")
	}
	if !(w.Rate > 0) || math.IsInf(w.Rate, 0) {
		return errors.New("rate must be > 0")
	}
	if w.Arrivals != "" && w.Arrivals != "poisson" && w.Arrivals != "uniform" {
		return fmt.Errorf("arrivals %q: want poisson or uniform", w.Arrivals)
	}
	for i, st := range w.RateSchedule {
		if !(st.Rate > 0) || (i > 0 && st.At < w.RateSchedule[i-1].At) {
			return fmt.Errorf("rate_schedule[%d]: rate must be > 0 and steps in time order", i)
		}
	}
	if len(w.Classes) == 0 {
		return errors.New("classes: need at least one (or a trace)")
	}
	for i, c := range w.Classes {
		where := fmt.Sprintf("classes[%d] (%s)", i, c.Name)
		switch {
		case !(c.Share > 0):
			return fmt.Errorf("%s: share must be > 0", where)
		case c.Kind != "shared" && c.Kind != "conversation":
			return fmt.Errorf("%s: kind %q: want shared or conversation", where, c.Kind)
		case c.Groups < 1 || c.Groups > 1<<22:
			return fmt.Errorf("%s: groups must be in [1, 4194304]", where)
		case c.Zipf < 0 || c.Zipf > 10:
			return fmt.Errorf("%s: zipf must be in [0, 10]", where)
		case c.Kind == "conversation" && (c.Conversations < 1 || c.Conversations > 1<<20):
			return fmt.Errorf("%s: conversations must be in [1, 1048576]", where)
		}
		for _, d := range []struct {
			name string
			d    Dist
		}{{"prefix_tokens", c.PrefixTokens}, {"suffix_tokens", c.SuffixTokens}, {"output_tokens", c.OutputTokens},
			{"turns", c.Turns}, {"user_tokens", c.UserTokens}} {
			if d.d.IsZero() {
				continue
			}
			if err := d.d.Validate(); err != nil {
				return fmt.Errorf("%s: %s: %w", where, d.name, err)
			}
		}
	}
	return nil
}

// Request is one simulated request: what the workload generates, then what
// the simulation did with it. The hash slices are shared read-only with the
// workload and must not be modified.
type Request struct {
	ID      uint64
	Arrival time.Duration
	Class   int
	// PromptTokens is the prompt's length; Hashes its full blocks' chained
	// hashes, as a gateway computes them.
	PromptTokens uint32
	Hashes       []uint64
	// OutputTokens is the answer's length; DecodeHashes the blocks that the
	// answer completes (cached when decoding ends).
	OutputTokens uint32
	DecodeHashes []uint64

	// Filled in by the simulation.
	Router       int
	Instance     int
	PredictedHit uint32 // the router's matched tokens (0 for baselines)
	// TargetMs is the request's TTFT target (WorkloadSpec.TTFTSLOMs);
	// PredictedMs the router's predicted TTFT of its choice, ms (0 for
	// baselines).
	TargetMs, PredictedMs float64
	// PredictedQueueMs is the part of PredictedMs the router priced as
	// work queued ahead on the instance (the decision's queue_ms), ms.
	PredictedQueueMs float64
	// HeldBy is the deployment whose fullness held the request's last
	// pick (scheduler.ErrDeploymentSaturated), under on_saturation: queue.
	HeldBy string
	// Hold is the router's dispatch hold of the pick (state.Pick.Hold,
	// policy dispatch_spacing_ms): the request reaches its instance that
	// much after the pick.
	Hold        time.Duration
	Start       time.Duration
	FirstToken  time.Duration
	HitTokens   uint32
	Recomputed  uint32
	estUncached uint32
	estWork     float64       // scheduler.PrefillWork of estUncached, at enqueue
	queued      time.Duration // when it was queued on its instance
	// hindsight (see engine.hindsight) and the own prefill time, ms.
	best                      int32
	estChosen, estBest, ownMs float32
	aheadMs                   float32 // the instance's exact queue when it was queued, ms
	// The pick's features for the fit of Variant.Outcomes (outcomes.go),
	// and when the pick was made (the gateway's ttft_ms counts from there:
	// a flow-queued request's wait is not in it).
	sample     calib.Sample
	picked     time.Duration
	deployment string
	prior      float64
}

// Workload yields requests in arrival order. Implementations are not safe
// for concurrent use.
type Workload interface {
	// Next returns the next request, or nil when the workload is over.
	Next() (*Request, error)
}

// synthetic is the Workload of a scenario's classes.
type synthetic struct {
	spec     *WorkloadSpec
	rng      *rand.Rand
	end      time.Duration
	t        time.Duration
	next     uint64
	classes  []*classGen
	cum      []float64
	poolSeed uint64
	bs       int
}

func newSynthetic(sc *Scenario, seed uint64) *synthetic {
	w := &synthetic{spec: &sc.Workload, rng: rand.New(rand.NewPCG(seed, 0x776f726b6c6f6164)),
		end: sc.Duration.D(), poolSeed: poolSeed(sc.Pool), bs: sc.BlockTokens}
	sum := 0.0
	for i := range sc.Workload.Classes {
		c := &sc.Workload.Classes[i]
		sum += c.Share
		w.cum = append(w.cum, sum)
		w.classes = append(w.classes, newClassGen(c, i, seed))
	}
	for i := range w.cum {
		w.cum[i] /= sum
	}
	return w
}

func (w *synthetic) rateAt(t time.Duration) float64 {
	r := w.spec.Rate
	for _, st := range w.spec.RateSchedule {
		if st.At.D() <= t {
			r = st.Rate
		}
	}
	return r
}

func (w *synthetic) Next() (*Request, error) {
	rate := w.rateAt(w.t)
	if w.spec.Arrivals == "uniform" {
		w.t += time.Duration(math.Round(1e9 / rate))
	} else {
		w.t += time.Duration(math.Round(w.rng.ExpFloat64() / rate * 1e9))
	}
	if w.t >= w.end {
		return nil, nil
	}
	u := w.rng.Float64()
	ci := 0
	for ci < len(w.cum)-1 && u >= w.cum[ci] {
		ci++
	}
	r := &Request{ID: w.next, Arrival: w.t, Class: ci}
	w.next++
	w.classes[ci].fill(w, r)
	return r, nil
}
