package enginemetrics

import (
	"math"
	"time"

	"github.com/prefixroute/prefixroute/pkg/client"
)

// Estimator defaults.
const (
	// ThroughputWindow is the shortest window a throughput is measured
	// over: 1s.
	ThroughputWindow = time.Second
	// throughputWeight is the moving average's weight of a new window.
	throughputWeight = 0.25
)

// Estimator turns Samples into Loads with the formulas of the package
// documentation. The zero value is ready; it is not safe for concurrent
// use.
type Estimator struct {
	// window start: a saturated sample.
	start     Sample
	startAt   time.Time
	haveStart bool
	// last sample with counters, for the mean prompt length.
	prev     Sample
	havePrev bool

	promptTokens float64 // mean prompt length, tokens
	throughput   float64 // tokens/s, 0 until measured
}

// Throughput returns the measured prefill throughput in tokens/s, 0 before
// a saturated window was seen.
func (e *Estimator) Throughput() float64 { return e.throughput }

// clean turns NaN, infinities and negatives into 0.
func clean(v float64) float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
		return 0
	}
	return v
}

// Add takes the sample scraped at now and returns the Load to report.
func (e *Estimator) Add(s Sample, now time.Time) client.Load {
	s.Waiting, s.Running, s.KVUsage = clean(s.Waiting), clean(s.Running), clean(s.KVUsage)
	s.PromptTokens, s.Requests = clean(s.PromptTokens), clean(s.Requests)
	if s.HasCounters {
		e.meanPrompt(s)
		e.measure(s, now)
	}
	waitingTokens := s.Waiting * e.promptTokens
	l := client.Load{
		RunningRequests:        uint32(min(s.Running, math.MaxUint32)),
		WaitingRequests:        uint32(min(s.Waiting, math.MaxUint32)),
		QueuedPrefillTokens:    uint64(min(waitingTokens, 1<<62)),
		KVCacheUsage:           min(s.KVUsage, 1),
		KVCapacityBlocks:       s.CapacityBlocks,
		BlockSizeTokens:        uint32(min(s.BlockSize, math.MaxUint32)),
		PrefillTokensPerSecond: e.throughput,
	}
	if e.throughput > 0 {
		l.QueueMs, l.HasQueueMs = QueueMs(waitingTokens, e.throughput), true
	}
	return l
}

// QueueMs is the queue estimate: waiting tokens over throughput (tokens/s),
// in ms; 0 when throughput is not positive.
func QueueMs(waitingTokens, throughput float64) float64 {
	if throughput <= 0 || waitingTokens <= 0 {
		return 0
	}
	return 1000 * waitingTokens / throughput
}

func (e *Estimator) meanPrompt(s Sample) {
	switch {
	case e.havePrev && s.Requests > e.prev.Requests && s.PromptTokens >= e.prev.PromptTokens:
		e.promptTokens = (s.PromptTokens - e.prev.PromptTokens) / (s.Requests - e.prev.Requests)
	case !e.havePrev && s.Requests > 0:
		e.promptTokens = s.PromptTokens / s.Requests
	case e.havePrev && (s.Requests < e.prev.Requests || s.PromptTokens < e.prev.PromptTokens):
		// The engine restarted: its counters began again.
		e.promptTokens, e.haveStart = 0, false
		if s.Requests > 0 {
			e.promptTokens = s.PromptTokens / s.Requests
		}
	}
	if s.Requests != e.prev.Requests || !e.havePrev {
		e.prev, e.havePrev = s, true
	}
}

func (e *Estimator) measure(s Sample, now time.Time) {
	if s.Waiting <= 0 {
		e.haveStart = false // not saturated: the window restarts
		return
	}
	if !e.haveStart || s.PromptTokens < e.start.PromptTokens {
		e.start, e.startAt, e.haveStart = s, now, true
		return
	}
	dt := now.Sub(e.startAt)
	if dt < ThroughputWindow {
		return
	}
	tps := (s.PromptTokens - e.start.PromptTokens) / dt.Seconds()
	if tps > 0 {
		if e.throughput == 0 {
			e.throughput = tps
		} else {
			e.throughput += throughputWeight * (tps - e.throughput)
		}
	}
	e.start, e.startAt = s, now
}
