package readiness

import (
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prefixroute/prefixroute/scheduler"
)

// Tracker accumulates one pool's picks over a sliding window and answers
// Status. It is safe for concurrent use: every method takes its own short
// mutex. Record allocates nothing in steady state (see Record).
type Tracker struct {
	mu    sync.Mutex
	cfg   Config // defaults applied
	width int64  // bucket width, ns
	nb    int    // buckets
	hb    int    // buckets of the recompute horizon, in [1, nb]
	maxD  int
	p     uint8 // sketch precision
	m     int   // 2^p registers

	started bool
	head    int64  // newest epoch recorded
	first   int64  // Unix ns of the earliest accepted Record
	late    uint64 // Records dropped as older than the ring

	// Tracked deployments, by slot: name, the newest epoch whose Record
	// named it, the block size last seen on its chosen instance (0: none).
	names     []string
	lastSeen  []int64
	blockSize []uint32

	pool  []poolCounts // [slot]
	deps  []depCounts  // [slot*maxD + dep]
	pairs []pairCounts // [(slot*maxD + a)*maxD + b]
	// regs[slot*maxD + a] is nil, or the registers of every pair (a, b) in
	// that bucket interleaved: 2^p rows of stride bytes, register i of pair
	// (a, b) at byte i*stride + b, so that a Record updates a hash's
	// register for all of a's pairs in one word. A bucket's block is
	// allocated by the first Record on a that needs it: 2^p × stride
	// bytes, stride the power of two ≥ len(names) (8 KiB for 2 tracked
	// deployments at the default precision, 32 KiB for 8); a tracked
	// deployment past the stride widens every block (widen).
	regs   [][]uint8
	stride int
	dirty  []bool // [slot*maxD*maxD + pair]: the pair's registers of that bucket non-zero
	hot    hotTable

	// The tracked slots of the last Record's snapshot deployments (see
	// trackAll): ix[k] for the deployment named ixNames[k], computed when
	// the head was ixHead; ixFull: every one of them tracked.
	ix      []int
	ixNames []string
	ixHead  int64
	ixFull  bool
	sinks   []sketchSink // scratch of Record

	defaultBS atomic.Uint32 // Config.BlockSizeTokens, or SetDefaultBlockSize's
}

// SetDefaultBlockSize replaces Config.BlockSizeTokens, the block size of
// instances that report none, for later Records (the pool's policy
// changed). 0 is ignored. Safe for concurrent use.
func (t *Tracker) SetDefaultBlockSize(tokens uint32) {
	if tokens > 0 {
		t.defaultBS.Store(tokens)
	}
}

// New returns an empty Tracker for cfg, zero fields taking their defaults.
// It panics with Validate's error if cfg is invalid: validate configuration
// from users with Config.Validate first. It allocates the bucket ring and
// the hot-prefix table up front; the distinct-block sketches of an ordered
// pair are allocated when the pair first has a block to count.
func New(cfg Config) *Tracker {
	if err := cfg.Validate(); err != nil {
		panic(err)
	}
	cfg = cfg.withDefaults()
	nb, maxD := cfg.Buckets, cfg.MaxDeployments
	t := &Tracker{
		cfg:       cfg,
		width:     int64(cfg.Window) / int64(nb),
		nb:        nb,
		hb:        horizonBuckets(cfg.RecomputeHorizon, int64(cfg.Window)/int64(nb), nb),
		maxD:      maxD,
		p:         cfg.SketchPrecision,
		m:         1 << cfg.SketchPrecision,
		names:     make([]string, 0, maxD),
		lastSeen:  make([]int64, maxD),
		blockSize: make([]uint32, maxD),
		pool:      make([]poolCounts, nb),
		deps:      make([]depCounts, nb*maxD),
		pairs:     make([]pairCounts, nb*maxD*maxD),
		regs:      make([][]uint8, nb*maxD),
		stride:    1,
		dirty:     make([]bool, nb*maxD*maxD),
		hot:       newHotTable(cfg.HotPrefixes, nb, cfg.MaxHotBlocks),
	}
	t.defaultBS.Store(cfg.BlockSizeTokens)
	return t
}

// horizonBuckets returns the recompute horizon h in buckets of width ns:
// rounded up, at least 1, at most nb.
func horizonBuckets(h time.Duration, width int64, nb int) int {
	k := (int64(h) + width - 1) / width
	return int(max(1, min(k, int64(nb))))
}

// Config returns the tracker's configuration with the defaults applied. It
// is safe for concurrent use (the configuration never changes).
func (t *Tracker) Config() Config { return t.cfg }

// Record accounts for one successful pick at now: hashes are the request's
// chained block hashes, promptTokens its length, snap and d the snapshot
// and decision of scheduler.Decide. Figures are clamped rather than
// trusted: matched blocks to [0, len(hashes)], UncachedTokens to the
// prompt, a PrefillMs that is NaN, infinite or negative counts 0. A nil
// snap or d, or a decision whose Deployment or Instance is out of range (a
// failed Decide), records nothing. A Record older than the window's ring is
// dropped (Status.LateRecords). hashes, snap and d are only read, and not
// kept (the hot-prefix table copies the hashes it keeps).
//
// Work: O(D) name comparisons for the D deployments of the snapshot when
// they are the previous Record's (else O(D·MaxDeployments)); O(Σ_b
// (len(hashes) − m_b)) register updates for the distinct-block sketches,
// the chosen deployment's pairs interleaved so that a hash's register and
// value are computed once and, past 3 pairs, 8 pairs are updated in one
// word (insertPairs); O(len(hashes)) to keep a longer hot chain,
// O(HotPrefixes) when a new prefix evicts one, and once per bucket width
// the clearing of the buckets the window leaves. It allocates only while growing: the sketches
// of a chosen deployment in a ring slot it has not used before (2^p bytes
// per tracked deployment, rounded up to a power of two), all of them again
// when the tracked deployments pass a power of two, a hot chain longer
// than its entry held, a snapshot with more deployments than any before.
func (t *Tracker) Record(now time.Time, hashes []uint64, promptTokens uint32, snap *scheduler.Snapshot, d *scheduler.Decision) {
	if snap == nil || d == nil {
		return
	}
	a, i := d.Deployment, d.Instance
	if a < 0 || a >= len(snap.Deployments) || a >= len(d.Deployments) ||
		i < 0 || i >= len(snap.Instances) || i >= len(d.Instances) {
		return
	}
	inst, res := &snap.Instances[i], &d.Instances[i]
	if pi := d.PD.Prefill; d.PD.Disaggregated() && pi < len(snap.Instances) && pi < len(d.Instances) {
		// A disaggregated pick: its prefill runs, and its prefix is
		// matched, on the prefill instance of the same deployment.
		inst, res = &snap.Instances[pi], &d.Instances[pi]
	}
	bs := inst.BlockSizeTokens
	if bs == 0 {
		bs = t.defaultBS.Load()
	}
	blocks := len(hashes)
	prompt := uint64(promptTokens)
	e := t.epochOf(now)

	t.mu.Lock()
	defer t.mu.Unlock()
	started := t.started
	if !t.accept(e) {
		t.late++
		return
	}
	if ns := now.UnixNano(); !started || ns < t.first {
		t.first = ns
	}
	s := t.slotOf(e)
	pc := &t.pool[s]
	pc.picks++
	pc.promptTokens += prompt
	if blocks > 0 {
		t.hot.record(s, e, hashes, promptTokens, bs)
	}

	nd := len(snap.Deployments)
	ix := t.trackAll(snap.Deployments, e)
	ta := ix[a]
	if ta < 0 {
		pc.untracked++
		return
	}
	t.blockSize[ta] = bs
	dc := &t.deps[s*t.maxD+ta]
	dc.picks++
	dc.promptTokens += prompt
	dc.hitTokens += min(prompt, uint64(clampBlocks(inst.MatchedBlocks, blocks))*uint64(bs))
	dc.prefillTokens += min(prompt, uint64(res.UncachedTokens))
	if ms := res.PrefillMs; ms > 0 && ms <= math.MaxFloat64 {
		dc.prefillMs += ms
	}

	ma := clampBlocks(d.Deployments[a].MatchedBlocks, blocks)
	seen := uint64(1) << ta // tracked slots already paired with a
	np := t.maxD * t.maxD
	sinks := t.sinks[:0]
	for k := range nd {
		tb := ix[k]
		if tb < 0 || seen&(1<<tb) != 0 {
			continue // untracked, a itself, or a duplicate name
		}
		seen |= 1 << tb
		mb := 0
		if k < len(d.Deployments) {
			mb = clampBlocks(d.Deployments[k].MatchedBlocks, blocks)
		}
		pair := ta*t.maxD + tb
		if ma > mb {
			pp := &t.pairs[s*np+pair]
			pp.requests++
			pp.promptTokens += prompt
		}
		if mb >= blocks {
			continue // b holds the whole prompt
		}
		sinks = append(sinks, sketchSink{tb, mb})
		t.dirty[s*np+pair] = true
	}
	if len(sinks) > 0 {
		blk := &t.regs[s*t.maxD+ta]
		if *blk == nil {
			*blk = make([]uint8, t.m*t.stride)
		}
		insertPairs(*blk, t.stride, t.p, hashes, sinks)
	}
	t.sinks = sinks
}

// trackAll returns the tracked slot of each of deps (by name), or -1, as
// t.track would for each in turn, named by a Record of epoch e. When the
// names are those of the previous call (the pool's deployments rarely
// change) and no slot can have been taken or freed since (every name
// tracked, or the head unchanged: slots are recycled only for an untracked
// name once the head has moved a window past them), it reuses that call's
// answer and only updates the slots' lastSeen: O(D) instead of
// O(D·MaxDeployments) name comparisons. Called with t.mu held; the result
// is valid until the next call.
func (t *Tracker) trackAll(deps []scheduler.Deployment, e int64) []int {
	nd := len(deps)
	if len(t.ixNames) == nd && (t.ixFull || t.ixHead == t.head) {
		same := true
		for k := range deps {
			if deps[k].Name != t.ixNames[k] {
				same = false
				break
			}
		}
		if same {
			for _, j := range t.ix {
				if j >= 0 {
					t.lastSeen[j] = max(t.lastSeen[j], e)
				}
			}
			return t.ix
		}
	}
	t.ix, t.ixNames = grow(t.ix, nd), grow(t.ixNames, nd)
	t.ixFull, t.ixHead = true, t.head
	for k := range deps {
		j := t.track(deps[k].Name, e)
		t.ix[k], t.ixNames[k] = j, deps[k].Name
		t.ixFull = t.ixFull && j >= 0
	}
	return t.ix
}

// clampBlocks returns m clamped to [0, blocks].
func clampBlocks(m, blocks int) int {
	return max(0, min(m, blocks))
}

// track returns the tracked slot of deployment name, named by a Record of
// epoch e, taking a free slot or one no Record has named inside the ring;
// -1 when every slot is in use. Called with t.mu held.
func (t *Tracker) track(name string, e int64) int {
	for j, n := range t.names {
		if n == name {
			t.lastSeen[j] = max(t.lastSeen[j], e)
			return j
		}
	}
	j := -1
	if len(t.names) < t.maxD {
		j = len(t.names)
		t.names = t.names[:j+1]
		if j >= t.stride {
			widen(t.regs, t.m, t.stride, 2*t.stride)
			t.stride *= 2
		}
	} else {
		// Every bucket a recycled slot has data in has been cleared: its
		// last Record is older than the ring.
		for k, seen := range t.lastSeen {
			if t.head-seen >= int64(t.nb) && (j < 0 || seen < t.lastSeen[j]) {
				j = k
			}
		}
		if j < 0 {
			return -1
		}
	}
	t.names[j], t.lastSeen[j], t.blockSize[j] = name, e, 0
	return j
}

// grow returns s with length nd, reusing its array when it is large enough.
func grow[T any](s []T, nd int) []T {
	if cap(s) >= nd {
		return s[:nd]
	}
	return make([]T, nd, nd+nd/4)
}
