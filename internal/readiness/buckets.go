package readiness

import (
	"slices"
	"time"
)

// The window is a ring of Buckets buckets of width Window/Buckets. Bucket
// epoch e covers the Unix-nanosecond times [e·width, (e+1)·width) and lives
// in ring slot e mod Buckets. The ring's head is the newest epoch recorded;
// the slots hold exactly the epochs (head−Buckets, head]: advancing the head
// clears the slots of the epochs it passes (each at most once, so a Record
// that advances the head by k buckets does O(min(k, Buckets)) extra work,
// once per bucket width at most in steady state). A Record older than that
// is dropped and counted in Status.LateRecords.
//
// The router keeps a second, simpler ring of picks per deployment
// (server/pickring.go, for the traffic-share and hit-ratio gauges and the
// console: one-second buckets, every deployment, in blocks). It is not
// read from this ring on purpose: this ring's width and length follow
// Config (the operator's --migration-window) and it tracks at most
// MaxDeployments deployments.

// poolCounts are the pool totals of one bucket.
type poolCounts struct {
	picks        uint64 // recorded picks
	promptTokens uint64 // their prompt tokens
	untracked    uint64 // picks on a deployment beyond MaxDeployments
}

// depCounts are one tracked deployment's figures in one bucket, over the
// picks that chose it.
type depCounts struct {
	picks         uint64
	promptTokens  uint64
	hitTokens     uint64  // min(prompt, chosen instance's matched blocks × block size)
	prefillTokens uint64  // chosen instance's UncachedTokens (≤ prompt)
	prefillMs     float64 // chosen instance's PrefillMs
}

// pairCounts are one ordered pair's figures in one bucket: a = the chosen
// deployment, b another deployment of the same snapshot and m the
// per-deployment MatchedBlocks of the decision. (The pair's distinct-block
// sketch, of hashes[m_b:] over every pick on a, is in Tracker.regs.)
type pairCounts struct {
	requests     uint64 // picks with m_a > m_b: cached on a, not on b
	promptTokens uint64 // their prompt tokens
}

// epochOf returns the bucket epoch of now (floor division, so times before
// 1970 work too). Times outside the years 1678–2262 have no defined Unix
// nanosecond time (time.Time.UnixNano); they give some epoch, never a panic.
func (t *Tracker) epochOf(now time.Time) int64 {
	ns := now.UnixNano()
	e := ns / t.width
	if ns%t.width < 0 {
		e--
	}
	return e
}

// slotOf returns the ring slot of epoch e.
func (t *Tracker) slotOf(e int64) int {
	s := e % int64(t.nb)
	if s < 0 {
		s += int64(t.nb)
	}
	return int(s)
}

// accept makes room for a record of epoch e, advancing the head if e is
// newer, and reports whether e is inside the ring (else the record is late).
func (t *Tracker) accept(e int64) bool {
	if !t.started {
		t.started, t.head = true, e
		return true
	}
	if e > t.head {
		if k := e - t.head; k <= 0 || k >= int64(t.nb) { // k <= 0: overflow
			for s := range t.nb {
				t.clearSlot(s)
			}
		} else {
			for x := t.head + 1; x <= e; x++ {
				t.clearSlot(t.slotOf(x))
			}
		}
		t.head = e
		return true
	}
	d := t.head - e
	return d >= 0 && d < int64(t.nb)
}

// clearSlot empties ring slot s, whose epoch leaves the window.
func (t *Tracker) clearSlot(s int) {
	t.pool[s] = poolCounts{}
	clear(t.deps[s*t.maxD : (s+1)*t.maxD])
	np := t.maxD * t.maxD
	clear(t.pairs[s*np : (s+1)*np])
	for a := range t.maxD {
		ds := t.dirty[s*np+a*t.maxD : s*np+(a+1)*t.maxD]
		if slices.Contains(ds, true) {
			clear(t.regs[s*t.maxD+a])
			clear(ds)
		}
	}
	t.hot.clearSlot(s)
}

// window returns the epochs lo..hi that hold data and lie in the window of
// Status at epoch n, the Buckets epochs (n−Buckets, n]; ok is false when
// there are none.
func (t *Tracker) window(n int64) (lo, hi int64, ok bool) {
	if !t.started {
		return 0, 0, false
	}
	lo = max(n, t.head) - int64(t.nb) + 1
	hi = min(n, t.head)
	return lo, hi, lo <= hi && hi-lo < int64(t.nb)
}

// covered returns the time the window ending at now covers: from the start
// of its oldest bucket, or from the first Record if that is later, to now.
// It lies in [0, Window) and is 0 before the first Record.
func (t *Tracker) covered(now time.Time, n int64) time.Duration {
	if !t.started {
		return 0
	}
	ns := now.UnixNano()
	start := max((n-int64(t.nb)+1)*t.width, t.first)
	c := ns - start
	if c <= 0 || c >= int64(t.cfg.Window) { // >= Window: only on overflow
		return 0
	}
	return time.Duration(c)
}
