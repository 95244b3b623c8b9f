package readiness

import (
	"cmp"
	"fmt"
	"slices"
	"time"
)

// hotCopy is a hot entry copied out of the table for Status.
type hotCopy struct {
	key                uint64
	chain              []uint64
	count, over        uint64
	prompt, bs         uint32
	depthFrom, depthTo int
}

// windowCopy holds what Status copies under the mutex.
type windowCopy struct {
	covered                  time.Duration
	horizon                  time.Duration // the part of covered the sketch spans
	picks, prompt, untracked uint64
	late                     uint64
	deps                     map[string]depCounts // tracked in the window
	pair                     pairCounts           // From→To
	fromBS                   uint32
	sketch                   []byte // From→To registers of the horizon merged, library encoding
	hot                      []hotCopy
}

// Status reports the window ending at now for q, combining it with live,
// the pool as it is now (see Status and its fields for each figure and
// unit). Errors wrap ErrInvalidQuery (a bad Query or a nil live),
// ErrSameDeployment or ErrUnknownDeployment (a name neither live nor tracked
// in the window). Status only reads the tracker. It copies the window under
// the mutex (O(Buckets·(MaxDeployments² + HotPrefixes) + Buckets·2^p) work,
// plus the hot chains) and calls live after releasing it. It allocates its
// result.
func (t *Tracker) Status(now time.Time, q Query, live Live) (Status, error) {
	q, err := q.check()
	if err != nil {
		return Status{}, err
	}
	if live == nil {
		return Status{}, fmt.Errorf("%w: nil Live", ErrInvalidQuery)
	}
	lv := live.Deployments(nil)
	w := t.copyWindow(now, q.From, q.To)

	st := Status{
		Now: now, Window: t.cfg.Window, Covered: w.covered,
		Picks: w.picks, PromptTokens: w.prompt, UntrackedPicks: w.untracked, LateRecords: w.late,
	}
	secs := w.covered.Seconds()
	byName := make(map[string]int, len(lv)+len(w.deps))
	var weightSum float64
	for _, l := range lv {
		if _, dup := byName[l.Name]; dup {
			continue
		}
		byName[l.Name] = len(st.Deployments)
		ds := DeploymentStatus{Name: l.Name, Live: true, Weight: nonNeg(l.Weight),
			Instances: max(0, l.Instances), ThroughputTokensPerSec: nonNeg(l.PrefillTokensPerSecond)}
		ds.Missing = missingSide(l)
		weightSum += ds.Weight
		st.Deployments = append(st.Deployments, ds)
	}
	for name := range w.deps {
		if _, ok := byName[name]; !ok {
			byName[name] = len(st.Deployments)
			st.Deployments = append(st.Deployments, DeploymentStatus{Name: name})
		}
	}
	for _, name := range []string{q.From, q.To} {
		if _, ok := byName[name]; !ok {
			return Status{}, fmt.Errorf("%w: %q is not in the pool and no pick in the window named it", ErrUnknownDeployment, name)
		}
	}
	for k := range st.Deployments {
		ds := &st.Deployments[k]
		ds.WeightShare = ratio(ds.Weight, weightSum)
		dc, ok := w.deps[ds.Name]
		ds.Tracked = ok
		ds.Picks, ds.PromptTokens, ds.HitTokens, ds.PrefillTokens, ds.PrefillMs =
			dc.picks, dc.promptTokens, dc.hitTokens, dc.prefillTokens, nonNeg(dc.prefillMs)
		ds.TrafficShare = ratio(float64(dc.picks), float64(w.picks))
		ds.HitRatio = ratio(float64(dc.hitTokens), float64(dc.promptTokens))
		ds.PrefillTokensPerSec = ratio(float64(dc.prefillTokens), secs)
		ds.PrefillMsPerSec = ratio(ds.PrefillMs, secs)
	}
	slices.SortFunc(st.Deployments, func(a, b DeploymentStatus) int { return cmp.Compare(a.Name, b.Name) })
	var from, to DeploymentStatus
	for _, ds := range st.Deployments {
		switch ds.Name {
		case q.From:
			from = ds
		case q.To:
			to = ds
		}
	}
	st.Migration = migrate(&w, from, to, weightSum, secs)

	for i := range w.hot {
		h := &w.hot[i]
		h.depthFrom = clampBlocks(live.Depth(h.chain, q.From), len(h.chain))
		h.depthTo = clampBlocks(live.Depth(h.chain, q.To), len(h.chain))
	}
	w.hot = slices.DeleteFunc(w.hot, func(h hotCopy) bool { return h.depthFrom <= h.depthTo })
	slices.SortFunc(w.hot, func(a, b hotCopy) int {
		if c := cmp.Compare(b.count, a.count); c != 0 {
			return c
		}
		return cmp.Compare(a.key, b.key)
	})
	for _, h := range w.hot[:min(len(w.hot), q.TopK)] {
		st.HotPrefixes = append(st.HotPrefixes, HotPrefix{
			FirstBlockHash: h.key, Blocks: len(h.chain), DepthFrom: h.depthFrom, DepthTo: h.depthTo,
			Requests: h.count, Overestimate: h.over, PromptTokens: h.prompt,
			ExtraTokens: uint64(h.depthFrom-h.depthTo) * uint64(h.bs),
		})
	}
	return st, nil
}

// migrate computes the Migration figures from the window copy and the two
// deployments' statuses.
func migrate(w *windowCopy, from, to DeploymentStatus, weightSum, secs float64) Migration {
	m := Migration{
		From: from.Name, To: to.Name, Tracked: from.Tracked && to.Tracked,
		CachedRequests: w.pair.requests, CachedPromptTokens: w.pair.promptTokens,
		MovedPrefillTokens: from.PrefillTokens, RecomputeHorizon: w.horizon,
		ToPrefillMsPerSec: to.PrefillMsPerSec, ToCapacityMsPerSec: 1000 * float64(to.Instances),
	}
	m.CachedRequestShare = ratio(float64(m.CachedRequests), float64(w.picks))
	m.CachedPromptShare = ratio(float64(m.CachedPromptTokens), float64(w.prompt))
	m.ToFraction = 1
	if others := weightSum - from.Weight; others > 0 {
		m.ToFraction = min(1, ratio(to.Weight, others))
	}
	if !m.Tracked {
		m.MovedPrefillTokens = 0 // a pair figure: incomplete
	}
	m.MovedPrefillTokensPerSec = m.ToFraction * ratio(float64(m.MovedPrefillTokens), secs)
	m.DistinctBlocks = estimateRegs(w.sketch)
	m.RecomputeTokens = m.ToFraction * float64(m.DistinctBlocks) * float64(w.fromBS)
	m.RecomputeTokensPerSec = ratio(m.RecomputeTokens, secs)
	m.ExtraTokensPerSec = m.MovedPrefillTokensPerSec + m.RecomputeTokensPerSec
	// Unknown rather than infinite: no throughput, no instance, or figures
	// so extreme that the quotient overflows.
	if to.Instances > 0 && to.ThroughputTokensPerSec > 0 {
		m.ToTokensPerMs = to.ThroughputTokensPerSec / float64(to.Instances) / 1000
		if x := m.ExtraTokensPerSec / m.ToTokensPerMs; m.ToTokensPerMs > 0 && finite(x) {
			m.ExtraPrefillMsPerSec, m.ExtraPrefillMsKnown = x, true
		}
	}
	if m.ExtraPrefillMsKnown && m.ToCapacityMsPerSec > 0 {
		h := 100 * (1 - (m.ToPrefillMsPerSec+m.ExtraPrefillMsPerSec)/m.ToCapacityMsPerSec)
		if finite(h) {
			m.HeadroomPct, m.HeadroomKnown, m.CanAbsorb = h, true, h >= 0 && to.Missing == ""
		}
	}
	m.ToMissing = to.Missing
	return m
}

// missingSide says which side a disaggregated deployment lacks to take
// traffic, "" when it lacks none: a deployment with prefill instances is
// ready only with an eligible prefill instance and an eligible decode (or
// both) instance; one without any is aggregated and needs an eligible
// instance only, as before.
func missingSide(l LiveDeployment) string {
	if l.PrefillRole <= 0 {
		return ""
	}
	decode := l.Instances - l.PrefillEligible
	switch {
	case l.PrefillEligible <= 0 && decode <= 0:
		return fmt.Sprintf("no eligible prefill instance (of %d) and no eligible decode instance", l.PrefillRole)
	case l.PrefillEligible <= 0:
		return fmt.Sprintf("no eligible prefill instance (of %d)", l.PrefillRole)
	case decode <= 0:
		return "no eligible decode instance"
	}
	return ""
}

// slotInHorizon reports whether ring slot s holds one of the recompute
// horizon's epochs at epoch n, (n − hb, n]. Called with t.mu held, for the
// slots of the window only (whose epochs are in (n − nb, n]).
func (t *Tracker) slotInHorizon(s int, n int64) bool {
	age := (t.slotOf(n) - s + t.nb) % t.nb // n − the slot's epoch
	return age < t.hb
}

// horizonCovered returns the time the recompute horizon ending at now
// covers: from the start of its oldest bucket, or from the first Record if
// that is later, to now; 0 before the first Record.
func (t *Tracker) horizonCovered(now time.Time, n int64) time.Duration {
	if !t.started {
		return 0
	}
	c := now.UnixNano() - max((n-int64(t.hb)+1)*t.width, t.first)
	return time.Duration(max(0, c))
}

// copyWindow copies, under the mutex, the window of Status at now: the pool
// totals, every deployment tracked in it, the from→to pair and its merged
// sketch, and the hot entries with requests in it.
func (t *Tracker) copyWindow(now time.Time, from, to string) windowCopy {
	n := t.epochOf(now)
	w := windowCopy{deps: map[string]depCounts{}, sketch: newSketchBuf(t.p), fromBS: t.defaultBS.Load()}
	t.mu.Lock()
	defer t.mu.Unlock()
	w.late = t.late
	w.covered = t.covered(now, n)
	w.horizon = min(w.covered, t.horizonCovered(now, n))
	lo, hi, ok := t.window(n)
	if !ok {
		return w
	}
	slots := make([]int, 0, hi-lo+1) // slots[k] holds epoch lo+k
	for e := lo; e <= hi; e++ {
		slots = append(slots, t.slotOf(e))
	}
	for _, s := range slots {
		pc := &t.pool[s]
		w.picks += pc.picks
		w.prompt += pc.promptTokens
		w.untracked += pc.untracked
	}
	fi, ti := -1, -1
	for j, name := range t.names {
		if t.lastSeen[j] < lo {
			continue // no data in the window
		}
		var dc depCounts
		for _, s := range slots {
			x := &t.deps[s*t.maxD+j]
			dc.picks += x.picks
			dc.promptTokens += x.promptTokens
			dc.hitTokens += x.hitTokens
			dc.prefillTokens += x.prefillTokens
			dc.prefillMs += x.prefillMs
		}
		w.deps[name] = dc
		switch name {
		case from:
			fi = j
		case to:
			ti = j
		}
	}
	if fi >= 0 && t.blockSize[fi] != 0 {
		w.fromBS = t.blockSize[fi]
	}
	if fi >= 0 && ti >= 0 {
		pair, np := fi*t.maxD+ti, t.maxD*t.maxD
		for _, s := range slots {
			x := &t.pairs[s*np+pair]
			w.pair.requests += x.requests
			w.pair.promptTokens += x.promptTokens
			if t.dirty[s*np+pair] && t.slotInHorizon(s, n) {
				maxColumn(w.sketch[sketchHeader:], t.regs[s*t.maxD+fi], t.stride, ti)
			}
		}
	}
	h := &t.hot
	for i := range h.n {
		c := h.windowed(i, slots)
		if c == 0 {
			continue
		}
		// The inherited counts lie in the buckets up to the admission's,
		// which also holds the admitting request itself.
		var over uint64
		if at := h.overAt[i]; h.over[i] > 0 && at >= lo {
			upTo := h.windowed(i, slots[:min(at, hi)-lo+1])
			if at <= hi {
				upTo--
			}
			over = min(h.over[i], upTo)
		}
		w.hot = append(w.hot, hotCopy{key: h.keys[i], chain: slices.Clone(h.chains[i]),
			count: c, over: over, prompt: h.prompt[i], bs: h.bs[i]})
	}
	return w
}
