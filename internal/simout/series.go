package simout

import (
	"slices"
	"time"

	"github.com/prefixroute/prefixroute/internal/sim"
)

// Second is one virtual second of a run, over the requests that arrived in
// it. Hit ratios are token-weighted: hit tokens / prompt tokens.
type Second struct {
	T          int
	Requests   int
	Rejected   int
	TTFTP50Ms  float64
	TTFTP99Ms  float64
	HitRatio   float64
	DepHit     []float64 // per deployment
	DepShare   []float64 // share of the second's requests
	Prompt     uint64
	Hit        uint64
	Prefilled  uint64
	Recomputed uint64 // prefilled although held by another instance
	// DepPrefilled is the prefilled tokens per deployment.
	DepPrefilled []uint64
	QueueMs      []float64
	Weights      []float64 // weight share per deployment in force at T
}

// Series returns the run's per-second time series.
func Series(res *sim.Result) []Second {
	n := int((res.Duration + time.Second - 1) / time.Second)
	nd := len(res.Deployments)
	out := make([]Second, n)
	ttft := make([][]float64, n)
	depPrompt := make([][]uint64, n)
	depHit := make([][]uint64, n)
	for s := range out {
		out[s] = Second{T: s, DepHit: make([]float64, nd), DepShare: make([]float64, nd), DepPrefilled: make([]uint64, nd),
			Weights: weightShares(res, time.Duration(s)*time.Second)}
		depPrompt[s], depHit[s] = make([]uint64, nd), make([]uint64, nd)
		if s < len(res.QueueMs) {
			out[s].QueueMs = res.QueueMs[s]
		}
	}
	for i := range res.Records {
		r := &res.Records[i]
		s := min(int(r.Arrival/time.Second), n-1)
		o := &out[s]
		o.Requests++
		o.Prompt += uint64(r.Prompt)
		o.Hit += uint64(r.Hit)
		o.Prefilled += uint64(r.Prompt - r.Hit)
		o.Recomputed += uint64(r.Recomputed)
		o.DepPrefilled[r.Deployment] += uint64(r.Prompt - r.Hit)
		o.DepShare[r.Deployment]++
		depPrompt[s][r.Deployment] += uint64(r.Prompt)
		depHit[s][r.Deployment] += uint64(r.Hit)
		ttft[s] = append(ttft[s], float64(r.TTFT)/1e6)
	}
	for i := range res.Rejected {
		out[min(int(res.Rejected[i].Arrival/time.Second), n-1)].Rejected++
	}
	for s := range out {
		o := &out[s]
		slices.Sort(ttft[s])
		o.TTFTP50Ms, o.TTFTP99Ms = sim.Percentile(ttft[s], 0.5), sim.Percentile(ttft[s], 0.99)
		if o.Prompt > 0 {
			o.HitRatio = float64(o.Hit) / float64(o.Prompt)
		}
		for d := range nd {
			if o.Requests > 0 {
				o.DepShare[d] /= float64(o.Requests)
			}
			if depPrompt[s][d] > 0 {
				o.DepHit[d] = float64(depHit[s][d]) / float64(depPrompt[s][d])
			}
		}
	}
	return out
}

// weightShares returns each deployment's weight share in force at t.
func weightShares(res *sim.Result, t time.Duration) []float64 {
	out := make([]float64, len(res.Deployments))
	var w map[string]float64
	for _, c := range res.Changes {
		if c.At <= t {
			w = c.Weights
		}
	}
	sum := 0.0
	for _, name := range res.Deployments {
		sum += w[name]
	}
	for d, name := range res.Deployments {
		if sum > 0 {
			out[d] = w[name] / sum
		}
	}
	return out
}
