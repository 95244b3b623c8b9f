package server

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prefixroute/prefixroute/frontend"
	"github.com/prefixroute/prefixroute/internal/rollout"
	"github.com/prefixroute/prefixroute/internal/state"
	"github.com/prefixroute/prefixroute/internal/store"
)

// The console's history (issue 19): per deployment, the last 15 minutes of
// successful picks in 1 s buckets (picks, blocks, matched blocks) and each
// instance's picks over the last 5 s; per pool, the failed picks by
// outcome and the changes of the configuration in force (markers).
//
// The deployment ring is the one the traffic-share gauges read
// (pickRing): a pick pays one lock, three adds and, within the history
// budget, one map lookup by instance id. Failures take their pool's ring
// lock; markers are written by publish, off the pick path.
//
// Memory is bounded: a ring is allocated for at most maxHistoryRings
// deployments and pools together (a deployment ring is about 21 KiB, a
// pool's failure ring 36 KiB); deployments and pools past it have no
// history (the console says so). A deployment tracks at most
// maxTrackedInstances instances' rates; past it the table is reset.
const (
	historySeconds      = frontend.HistorySeconds
	maxHistoryRings     = 512
	maxTrackedInstances = 4096
	maxMarkers          = 256
)

// failRing is one pool's failed picks per second by outcome.
type failRing struct {
	mu      sync.Mutex
	buckets [historySeconds]failBucket
	marks   []frontend.Marker // oldest first, at most maxMarkers
	last    *store.PoolConfig // the configuration last published, for markerOf
}

type failBucket struct {
	sec int64
	n   [numOutcomes]uint32
}

func (f *failRing) add(sec int64, oc outcome) {
	f.mu.Lock()
	b := &f.buckets[ringIndex(sec, historySeconds)]
	if b.sec != sec {
		*b = failBucket{sec: sec}
	}
	b.n[oc]++
	f.mu.Unlock()
}

// ringBudget hands out rings until maxHistoryRings are taken. Safe for
// concurrent use.
type ringBudget struct{ n atomic.Int64 }

func (b *ringBudget) take() bool {
	if b.n.Add(1) > maxHistoryRings {
		b.n.Add(-1)
		return false
	}
	return true
}

// published records a configuration put in force on pool as a marker when
// it changed the weights or the ramp; before and after are the
// deployments' weights in force until then and from now. publish calls it
// with adminMu held.
func (o *observer) published(pool string, before []state.DeploymentWeight, pc store.PoolConfig, after []state.DeploymentWeight) {
	if o == nil {
		return
	}
	f := o.pool(pool).fails
	if f == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	kind, label := markerOf(f.last, pc)
	last := pc
	if pc.Ramp != nil { // a copy: markerOf compares the next one's ID, State and Applied with these
		r := *pc.Ramp
		last.Ramp = &r
	}
	f.last = &last
	if kind == "" {
		return
	}
	m := frontend.Marker{At: o.now().UnixMilli(), Kind: kind, Label: label, WeightsVersion: pc.WeightsVersion,
		Before: sharesOf(before), After: sharesOf(after)}
	cut := m.At - historySeconds*1000
	i := 0
	for i < len(f.marks)-1 && f.marks[i+1].At < cut { // keep the last one before the window: it holds the weights then
		i++
	}
	f.marks = append(f.marks[i:], m)
	if len(f.marks) > maxMarkers {
		f.marks = slices.Delete(f.marks, 0, len(f.marks)-maxMarkers)
	}
}

// markerOf names what changed from prev (nil: the first configuration
// published since start) to pc, or "" when neither the weights nor the ramp
// did (a policy change).
func markerOf(prev *store.PoolConfig, pc store.PoolConfig) (kind, label string) {
	r := pc.Ramp
	var old *rollout.Ramp
	if prev != nil {
		old = prev.Ramp
	}
	switch {
	case r != nil && old == nil && prev != nil, r != nil && old != nil && old.ID != r.ID:
		return "ramp", fmt.Sprintf("ramp %d started", r.ID)
	case r != nil && (old == nil || old.Applied != r.Applied) && r.Applied > 0:
		label := fmt.Sprintf("ramp %d step %d/%d", r.ID, r.Applied, len(r.Steps))
		if r.State == rollout.Done {
			label += " (done)"
		}
		return "ramp", label
	case r != nil && old != nil && old.State != r.State:
		return "ramp", fmt.Sprintf("ramp %d %s", r.ID, r.State)
	case prev == nil || prev.WeightsVersion != pc.WeightsVersion:
		return "weights", fmt.Sprintf("weights v%d", pc.WeightsVersion)
	}
	return "", ""
}

func sharesOf(ds []state.DeploymentWeight) map[string]float64 {
	out := make(map[string]float64, len(ds))
	for _, d := range ds {
		out[d.Deployment] = d.Share
	}
	return out
}

// history returns pool's ring as it stands at now: false when no pick,
// report or change made the observer track the pool yet.
func (o *observer) history(pool string, now time.Time) (frontend.History, bool) {
	if o == nil {
		return frontend.History{}, false
	}
	p := o.lookup(pool)
	if p == nil {
		return frontend.History{}, false
	}
	sec := now.Unix()
	h := frontend.History{Start: sec - historySeconds + 1, Seconds: historySeconds, InstancePicks: map[string]float64{}}
	p.mu.RLock()
	deps := make([]*depObs, 0, len(p.deps))
	for _, d := range p.deps {
		deps = append(deps, d)
	}
	p.mu.RUnlock()
	slices.SortFunc(deps, func(a, b *depObs) int { return strings.Compare(a.name, b.name) })
	for _, d := range deps {
		s := frontend.DeploymentSeries{Deployment: d.name, Picks: make([]uint32, historySeconds),
			Blocks: make([]uint32, historySeconds), Matched: make([]uint32, historySeconds)}
		d.ring.series(&s, h.Start, h.InstancePicks)
		h.Deployments = append(h.Deployments, s)
	}
	if f := p.fails; f != nil {
		var byOutcome [numOutcomes][]uint32
		f.mu.Lock()
		for i := range historySeconds {
			t := h.Start + int64(i)
			b := &f.buckets[ringIndex(t, historySeconds)]
			if b.sec != t {
				continue
			}
			for oc, n := range b.n {
				if n > 0 {
					if byOutcome[oc] == nil {
						byOutcome[oc] = make([]uint32, historySeconds)
					}
					byOutcome[oc][i] = n
				}
			}
		}
		h.Markers = slices.Clone(f.marks)
		f.mu.Unlock()
		for oc, s := range byOutcome {
			if s != nil {
				h.Failures = append(h.Failures, frontend.FailureSeries{Outcome: outcomeNames[oc], Picks: s})
			}
		}
	}
	return h, true
}

// series fills s, the console's series of seconds start .. start+
// historySeconds-1, and adds each instance's picks/s over the last
// InstanceRateSeconds of them to rates. A ring without history leaves
// both as they are.
func (r *pickRing) series(s *frontend.DeploymentSeries, start int64, rates map[string]float64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.history() {
		return
	}
	for i := range historySeconds {
		t := start + int64(i)
		if b := &r.buckets[ringIndex(t, len(r.buckets))]; b.sec == t {
			s.Picks[i], s.Blocks[i], s.Matched[i] = b.picks, b.blocks, b.matched
		}
	}
	last := start + historySeconds - 1
	for id, ir := range r.inst {
		var n uint32
		for j := range ir.sec {
			if ir.sec[j] > last-frontend.InstanceRateSeconds && ir.sec[j] <= last {
				n += ir.n[j]
			}
		}
		if n > 0 {
			rates[id] = float64(n) / frontend.InstanceRateSeconds
		}
	}
}
