package simout

import (
	"github.com/prefixroute/prefixroute/internal/sim"

	"math"
	"slices"
	"time"
)

// Summary condenses one run over [warmup, duration): the figures of the
// markdown tables. A plain value.
type Summary struct {
	Variant  string
	Baseline bool
	// Picker is the variant's picker ("" for the router).
	Picker   string
	Requests int
	Rejected int
	// TTFT in ms.
	TTFTP50, TTFTP99, TTFTMax float64
	// HitRatio is hit tokens / prompt tokens; PredictedHitRatio the same
	// with the tokens the router expected to hit (0 for baselines).
	HitRatio, PredictedHitRatio float64
	// MaxInstanceShare is the largest share of the requests one instance
	// served, MaxInstance its id.
	MaxInstanceShare float64
	MaxInstance      string
	// DepShare is the realised share of requests per deployment;
	// FocusClassShare the focus deployment's share of each workload
	// class's requests.
	DepShare        []float64
	FocusClassShare []float64
	// ShareErrorMax is the largest |realised - weight| share of the focus
	// deployment over 60-s windows with constant weights; ShareSigma the
	// binomial standard deviation expected for the average window.
	ShareErrorMax, ShareSigma float64
	Prefilled, Recomputed     uint64
	// QueueMaxMs is the mean over the sampled seconds of the longest
	// instance queue (the instance's own estimate, ms), QueueMeanMs the
	// mean over seconds and instances: a hotspot shows as a large ratio.
	QueueMaxMs, QueueMeanMs float64
	// BusyMean is the fleet's mean prefill busy fraction after the warmup,
	// BusyMin and BusyMax the least and most busy instance's.
	BusyMean, BusyMin, BusyMax float64
	// Starved is the fraction of seconds after the warmup in which one
	// instance's queue was over StarvedQueueMs while another was less than
	// half busy; QueueEndMaxMs the longest queue in the last second of
	// arrivals.
	Starved, QueueEndMaxMs float64
	// Tail takes the slowest 1 % apart.
	Tail Tail
	Dips []Dip
	// Readiness is the run's readiness probe (Result.Readiness), nil
	// without one.
	Readiness *sim.ReadinessResult
	// Prediction is the router's predicted TTFT against the actual one, and
	// the TTFT targets met (prediction.go).
	Prediction Prediction
}

// Dip is the hit-ratio dip after one weight change: the smoothed hit ratio
// (token-weighted, trailing window Scenario.Smooth, not reaching back past
// the change) compared with the hit ratio of the minute before it.
type Dip struct {
	At       time.Duration
	Weights  map[string]float64
	Baseline float64 // hit ratio over up to 60 s before the change
	Min      float64 // lowest smoothed hit ratio until the next change
	Depth    float64 // Baseline - Min, >= 0
	MinAfter time.Duration
	// HalfWidth is how long the smoothed hit ratio stayed below Baseline -
	// Depth/2; Recovery when it first came back within 0.02 of Baseline
	// after the minimum (-1: not before the next change or the end).
	HalfWidth, Recovery time.Duration
	// PeakTTFTP99 is the highest per-second TTFT p99 (ms), and
	// PeakPrefillRatio the highest per-second prefilled tokens over the
	// average per-second prefilled tokens of the minute before.
	PeakTTFTP99, PeakPrefillRatio float64
}

// Summarise computes the run's Summary.
func Summarise(res *sim.Result) Summary {
	s := Summary{Variant: res.Variant.Name, Baseline: res.Variant.Baseline(), Picker: res.Variant.Picker, DepShare: make([]float64, len(res.Deployments)),
		Readiness: res.Readiness, Prediction: predictionOf(res)}
	var ttft []float64
	perInst := make([]int, len(res.Instances))
	var prompt, hit, pred uint64
	f := focusIndex(res)
	classN := make([]int, len(res.Classes))
	s.FocusClassShare = make([]float64, len(res.Classes))
	for i := range res.Records {
		r := &res.Records[i]
		if r.Arrival < res.Warmup {
			continue
		}
		s.Requests++
		ttft = append(ttft, float64(r.TTFT)/1e6)
		perInst[r.Instance]++
		s.DepShare[r.Deployment]++
		if c := int(r.Class); c < len(classN) {
			classN[c]++
			if int(r.Deployment) == f {
				s.FocusClassShare[c]++
			}
		}
		prompt += uint64(r.Prompt)
		hit += uint64(r.Hit)
		pred += uint64(r.Predicted)
		s.Prefilled += uint64(r.Prompt - r.Hit)
		s.Recomputed += uint64(r.Recomputed)
	}
	for i := range res.Rejected {
		if res.Rejected[i].Arrival >= res.Warmup {
			s.Rejected++
		}
	}
	slices.Sort(ttft)
	s.TTFTP50, s.TTFTP99 = sim.Percentile(ttft, 0.5), sim.Percentile(ttft, 0.99)
	if len(ttft) > 0 {
		s.TTFTMax = ttft[len(ttft)-1]
	}
	if prompt > 0 {
		s.HitRatio, s.PredictedHitRatio = float64(hit)/float64(prompt), float64(pred)/float64(prompt)
	}
	for i, n := range perInst {
		if share := float64(n) / float64(max(s.Requests, 1)); share > s.MaxInstanceShare {
			s.MaxInstanceShare, s.MaxInstance = share, res.Instances[i].ID
		}
	}
	for d := range s.DepShare {
		s.DepShare[d] /= float64(max(s.Requests, 1))
	}
	for c, n := range classN {
		s.FocusClassShare[c] /= float64(max(n, 1))
	}
	n := 0
	for sec, q := range res.QueueMs {
		if time.Duration(sec+1)*time.Second <= res.Warmup || len(q) == 0 {
			continue
		}
		mx, sum := 0.0, 0.0
		for _, v := range q {
			mx, sum = max(mx, v), sum+v
		}
		s.QueueMaxMs += mx
		s.QueueMeanMs += sum / float64(len(q))
		n++
	}
	if n > 0 {
		s.QueueMaxMs /= float64(n)
		s.QueueMeanMs /= float64(n)
	}
	s.busy(res)
	s.Tail = TailOf(res)
	series := Series(res)
	s.ShareErrorMax, s.ShareSigma = shareError(res, series)
	for i, c := range res.Changes {
		if i > 0 && c.At < res.Duration {
			s.Dips = append(s.Dips, dip(res, series, c))
		}
	}
	return s
}

// StarvedQueueMs is the queue over which an instance counts as backed up
// while another is less than half busy (Summary.Starved): 1000 ms.
const StarvedQueueMs = 1000

// busy fills the busy and starvation figures from the per-second samples.
func (s *Summary) busy(res *sim.Result) {
	var per []float64
	n, starved := 0, 0
	for sec, b := range res.Busy {
		if time.Duration(sec+1)*time.Second <= res.Warmup || len(b) == 0 {
			continue
		}
		if per == nil {
			per = make([]float64, len(b))
		}
		maxQ, minB := 0.0, 1.0
		for i, v := range b {
			per[i] += v
			minB = min(minB, v)
			if sec < len(res.QueueMs) {
				maxQ = max(maxQ, res.QueueMs[sec][i])
			}
		}
		if maxQ > StarvedQueueMs && minB < 0.5 {
			starved++
		}
		n++
	}
	if n == 0 {
		return
	}
	s.BusyMin = 1
	for _, v := range per {
		v /= float64(n)
		s.BusyMean += v / float64(len(per))
		s.BusyMin, s.BusyMax = min(s.BusyMin, v), max(s.BusyMax, v)
	}
	s.Starved = float64(starved) / float64(n)
	if last := int(res.Duration/time.Second) - 1; last >= 0 && last < len(res.QueueMs) {
		s.QueueEndMaxMs = slices.Max(res.QueueMs[last])
	}
}

// focusIndex is the index of the focus deployment.
func focusIndex(res *sim.Result) int {
	if i := slices.Index(res.Deployments, res.Focus); i >= 0 {
		return i
	}
	return len(res.Deployments) - 1
}

// shareError compares the focus deployment's realised share with its
// weight share over 60-s windows after the warmup in which the weights did
// not change.
func shareError(res *sim.Result, series []Second) (worst, sigma float64) {
	f := focusIndex(res)
	start := int(res.Warmup / time.Second)
	var sigmas []float64
	for w := start; w+60 <= len(series); w += 60 {
		n, share := 0, 0.0
		p := series[w].Weights[f]
		steady := true
		for _, sec := range series[w : w+60] {
			steady = steady && sec.Weights[f] == p
			n += sec.Requests
			share += sec.DepShare[f] * float64(sec.Requests)
		}
		if !steady || n == 0 {
			continue
		}
		worst = max(worst, math.Abs(share/float64(n)-p))
		sigmas = append(sigmas, math.Sqrt(p*(1-p)/float64(n)))
	}
	if len(sigmas) > 0 {
		sum := 0.0
		for _, v := range sigmas {
			sum += v
		}
		sigma = sum / float64(len(sigmas))
	}
	return worst, sigma
}

// dip measures the hit-ratio dip after change c.
func dip(res *sim.Result, series []Second, c sim.WeightChange) Dip {
	d := Dip{At: c.At, Weights: c.Weights, Recovery: -1}
	t0 := int(c.At / time.Second)
	t1 := len(series)
	for _, o := range res.Changes {
		if o.At > c.At {
			t1 = min(t1, int(o.At/time.Second))
		}
	}
	from := max(0, t0-60)
	for _, o := range res.Changes {
		if o.At < c.At {
			from = max(from, int(o.At/time.Second))
		}
	}
	var p, h, pre uint64
	for _, sec := range series[from:t0] {
		p, h, pre = p+sec.Prompt, h+sec.Hit, pre+sec.Prefilled
	}
	if p > 0 {
		d.Baseline = float64(h) / float64(p)
	}
	avgPrefill := float64(pre) / float64(max(t0-from, 1))
	win := max(1, int(res.Smooth/time.Second))
	smooth := make([]float64, 0, t1-t0)
	d.Min = d.Baseline
	minAt := t0
	for s := t0; s < t1; s++ {
		var sp, sh uint64
		for _, sec := range series[max(t0, s-win+1) : s+1] {
			sp, sh = sp+sec.Prompt, sh+sec.Hit
		}
		v := d.Baseline
		if sp > 0 {
			v = float64(sh) / float64(sp)
		}
		smooth = append(smooth, v)
		if v < d.Min {
			d.Min, minAt = v, s
		}
		d.PeakTTFTP99 = max(d.PeakTTFTP99, series[s].TTFTP99Ms)
		if avgPrefill > 0 {
			d.PeakPrefillRatio = max(d.PeakPrefillRatio, float64(series[s].Prefilled)/avgPrefill)
		}
	}
	d.Depth = d.Baseline - d.Min
	d.MinAfter = time.Duration(minAt-t0) * time.Second
	for i, v := range smooth {
		if d.Depth > 0 && v < d.Baseline-d.Depth/2 {
			d.HalfWidth += time.Second
		}
		if d.Recovery < 0 && t0+i >= minAt && v >= d.Baseline-0.02 {
			d.Recovery = time.Duration(i) * time.Second
		}
	}
	return d
}
