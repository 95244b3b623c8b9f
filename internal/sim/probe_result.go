package sim

import (
	"slices"
	"time"

	"github.com/prefixroute/prefixroute/internal/readiness"
)

// ReadinessResult is a readiness probe's estimate and what the run measured
// after the cutover. Token figures are in tokens, rates in tokens per
// second. A plain value.
type ReadinessResult struct {
	From, To string
	// At is when router 0 was asked; Cutover when From's weight reached 0;
	// Window the trackers' window. Routers is the number of router
	// replicas: the estimate is router 0's, which sees 1/Routers of the
	// picks.
	At, Cutover, Window time.Duration
	Routers             int
	BlockTokens         int
	// Status is router 0's state.Pool.Migration answer at At; its
	// Migration holds the estimate.
	Status readiness.Status

	// Before is the span the estimate covered, [At − Status.Covered, At);
	// After the span measured after the cutover, [Cutover, Cutover +
	// After), Window unless the run ended sooner.
	Before, After time.Duration
	// ToPrefilledBefore and ToPrefilledAfter are the tokens To's instances
	// prefilled for the requests that arrived in each span, ToBeforePerSec
	// and ToAfterPerSec the same per second. ActualExtraPerSec is
	// ToAfterPerSec − ToBeforePerSec, what To actually gained.
	ToPrefilledBefore, ToPrefilledAfter uint64
	ToBeforePerSec, ToAfterPerSec       float64
	ActualExtraPerSec                   float64
	// ToBusyBefore and ToBusyAfter are the fractions of To's instance time
	// spent in prefill batches (overheads included) that started in each
	// span; ToTTFTP99Before and ToTTFTP99After To's TTFT p99 (ms) over the
	// requests that arrived in each span.
	ToBusyBefore, ToBusyAfter       float64
	ToTTFTP99Before, ToTTFTP99After float64

	// RecomputedBlocks is the actual recompute: the distinct blocks that
	// some instance of From held at the cutover and no instance of To
	// held then, which To's instances prefilled for requests arriving in
	// After (each counted once); RecomputedTokens = RecomputedBlocks ×
	// BlockTokens. FromOnlyBlocks is the size of that set at the cutover
	// (From's cached blocks To lacked).
	RecomputedBlocks, RecomputedTokens uint64
	FromOnlyBlocks                     uint64

	// Gap explains estimate against actual, exactly, in blocks (see
	// ReadinessGap).
	Gap ReadinessGap
}

// ReadinessGap compares, block by block, the set E the estimate's
// sketch counts (the blocks hashes[matched_To:] of router 0's picks on From
// in the estimate's recompute horizon, [At − Status.Migration.
// RecomputeHorizon, At), exactly: Status.Migration.DistinctBlocks is its
// HyperLogLog estimate) with the set R actually
// recomputed (ReadinessResult.RecomputedBlocks), and breaks To's prefill
// down. A plain value.
type ReadinessGap struct {
	// Exact is |E|; Both is |E ∩ R|.
	Exact, Both uint64
	// E \ R, by reason: To held the block at the cutover (it cached it
	// after the pick that counted it), From no longer held it (evicted),
	// or it was not requested from To within After.
	ToHeld, FromEvicted, NotRequested uint64
	// R \ E, by reason: the block was in a pick on From with To lacking
	// it (hashes[matched_To:]) only between At and the cutover, or only
	// before the horizon (within two windows before At), or never in such
	// a pick in that time (From wrote it with its decode, e.g. a
	// conversation's last answer, or held it from longer ago, and To's
	// first request for it came after the cutover).
	GapMatched, OlderMatched, NeverMatched uint64
	// ExactByClass and RecomputedByClass split |E| and |R| by workload
	// class (Result.Classes): the class of the last pick that carried the
	// block, and of the request To recomputed it for.
	ExactByClass, RecomputedByClass []uint64
	// RecomputedLater counts the blocks of the From-only set that To first
	// prefilled for requests arriving after the After window, until the
	// end of the run (LaterSpan): how much the debt grows with a longer
	// horizon.
	RecomputedLater uint64
	LaterSpan       time.Duration
	// Before and After break To's prefilled tokens, per second of each
	// span, down by what the blocks were at the batch's start.
	Before, After PrefillMix
	// WhatIf are other estimators of the recompute, computed exactly from
	// the same picks (see WhatIf).
	WhatIf WhatIf
}

// PrefillMix breaks a deployment's prefilled tokens per second down, by
// what each full block was when its batch started: FromOnlyFirst are the
// From-only blocks at the cutover prefilled for the first time (the actual
// recompute), FromOnlyAgain those prefilled again (on another instance of
// To, or after an eviction); of the other blocks, New are those no
// instance held (any deployment would have prefilled them) and Elsewhere
// those another instance held (of To, or of From). Partial are the
// prompts' trailing partial blocks. Before the cutover there is no
// From-only set: every held block is in Elsewhere.
type PrefillMix struct {
	New, Partial, FromOnlyFirst, FromOnlyAgain, Elsewhere float64
}

// WhatIf are alternative recompute estimators, in blocks, evaluated
// exactly (no sketch) on router 0's picks in [At − Window, At), for the
// lead to compare with R. E is the tracker's former set (the blocks a pick
// on From matched there and To did not: hashes[matched_To:matched_From]);
// W ("written") adds the blocks that pick left on From by prefilling them,
// hashes[matched_To:], the tracker's set now.
type WhatIf struct {
	// LastE[k] and LastW[k] are |E| and |W| over the last (k+1)/8 of the
	// window only: a recompute horizon shorter than the window.
	LastE, LastW [8]uint64
	// RecurW2 is |W₁ ∩ W₂| for W₁, W₂ the W sets of the window's two
	// halves; RecurW4 the same for its last two quarters; HalfW1 is |W₁|.
	RecurW2, RecurW4, HalfW1 uint64
	// Snapshot is R's stationary analogue one window earlier: of the
	// SnapshotFromOnly blocks From held and To did not at At − Window, the
	// ones any pick requested in [At − Window, At).
	Snapshot, SnapshotFromOnly uint64
}

// result computes the ReadinessResult from the probe and the run's
// records; nil when the probe never fired.
func (p *probe) result(res *Result) *ReadinessResult {
	if !p.fired {
		return nil
	}
	c := p.cfg
	rr := &ReadinessResult{From: c.spec.From, To: c.spec.To, At: c.at, Cutover: c.cut, Window: c.window,
		Routers: p.routers, BlockTokens: p.bs, Status: p.status, Before: p.status.Covered}
	if p.cut {
		rr.After = min(c.window, res.Duration-c.cut)
	}
	var before, after []float64
	for i := range res.Records {
		r := &res.Records[i]
		if int(r.Deployment) != c.to {
			continue
		}
		switch {
		case r.Arrival >= p.lo && r.Arrival < c.at:
			rr.ToPrefilledBefore += uint64(r.Prompt - r.Hit)
			before = append(before, float64(r.TTFT)/1e6)
		case p.cut && r.Arrival >= c.cut && r.Arrival < c.cut+rr.After:
			rr.ToPrefilledAfter += uint64(r.Prompt - r.Hit)
			after = append(after, float64(r.TTFT)/1e6)
		}
	}
	slices.Sort(before)
	slices.Sort(after)
	rr.ToTTFTP99Before, rr.ToTTFTP99After = percentile(before, 0.99), percentile(after, 0.99)
	n := 0.0
	for _, in := range res.Instances {
		if in.Deployment == c.spec.To {
			n++
		}
	}
	g := &rr.Gap
	nc := max(len(res.Classes), 1)
	for _, b := range p.seen {
		nc = max(nc, int(b.class)+1)
	}
	for _, r := range p.recomp {
		nc = max(nc, int(r.class)+1)
	}
	g.ExactByClass, g.RecomputedByClass = make([]uint64, nc), make([]uint64, nc)
	if rr.Before > 0 {
		secs := rr.Before.Seconds()
		rr.ToBeforePerSec = float64(rr.ToPrefilledBefore) / secs
		rr.ToBusyBefore = p.busyBefore.Seconds() / (secs * n)
		for _, m := range p.reqs {
			if m.at >= p.lo {
				g.Before.New += float64(m.newT) / secs
				g.Before.Partial += float64(m.partial) / secs
				g.Before.Elsewhere += float64(m.elsewhere) / secs
			}
		}
	}
	if rr.After > 0 {
		secs := rr.After.Seconds()
		rr.ToAfterPerSec = float64(rr.ToPrefilledAfter) / secs
		rr.ToBusyAfter = p.busyAfter.Seconds() / (secs * n)
		a := p.after
		g.After = PrefillMix{New: a.New / secs, Partial: a.Partial / secs, FromOnlyFirst: a.FromOnlyFirst / secs,
			FromOnlyAgain: a.FromOnlyAgain / secs, Elsewhere: a.Elsewhere / secs}
	}
	rr.ActualExtraPerSec = rr.ToAfterPerSec - rr.ToBeforePerSec
	if p.cut {
		for h := range p.fromHeld {
			if !p.toHeld[h] {
				rr.FromOnlyBlocks++
			}
		}
		g.LaterSpan = max(0, res.Duration-c.cut-c.window)
	}
	inR := func(h uint64) bool {
		x, ok := p.recomp[h]
		return ok && x.at < c.cut+rr.After
	}
	for _, x := range p.recomp {
		if x.at < c.cut+rr.After {
			rr.RecomputedBlocks++
			g.RecomputedByClass[x.class]++
		} else {
			g.RecomputedLater++
		}
	}
	rr.RecomputedTokens = rr.RecomputedBlocks * uint64(p.bs)
	hz := c.at - p.status.Migration.RecomputeHorizon // E's span: [hz, At)
	for h, b := range p.seen {
		for k := range 8 {
			top := uint8(0xff) << (7 - k) // the last k+1 eighths
			g.WhatIf.LastE[k] += b2u(b.mask&top != 0)
			g.WhatIf.LastW[k] += b2u(b.wmask&top != 0)
		}
		g.WhatIf.RecurW2 += b2u(b.wmask&0x0f != 0 && b.wmask&0xf0 != 0)
		g.WhatIf.RecurW4 += b2u(b.wmask&0x30 != 0 && b.wmask&0xc0 != 0)
		g.WhatIf.HalfW1 += b2u(b.wmask&0x0f != 0)
		if b.last < hz {
			continue
		}
		g.Exact++
		g.ExactByClass[b.class]++
		switch {
		case !p.cut:
			// the run ended before the cutover: nothing to compare
		case inR(h):
			g.Both++
		case p.toHeld[h]:
			g.ToHeld++
		case !p.fromHeld[h]:
			g.FromEvicted++
		default:
			g.NotRequested++
		}
	}
	for h, x := range p.recomp {
		if x.at >= c.cut+rr.After {
			continue
		}
		b, ok := p.seen[h]
		if ok && b.last >= hz {
			continue
		}
		if p.gap[h] {
			g.GapMatched++
		} else if ok {
			g.OlderMatched++
		} else {
			g.NeverMatched++
		}
	}
	g.WhatIf.SnapshotFromOnly = uint64(len(p.snap))
	for _, req := range p.snap {
		g.WhatIf.Snapshot += b2u(req)
	}
	return rr
}

func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// RecomputeRatio is the estimated over the actual recompute (0 when
// nothing was recomputed).
func (rr *ReadinessResult) RecomputeRatio() float64 {
	return ratioOr0(rr.Status.Migration.RecomputeTokens, float64(rr.RecomputedTokens))
}

// ExtraRatio is the estimated over the actual extra prefill rate of To.
func (rr *ReadinessResult) ExtraRatio() float64 {
	return ratioOr0(rr.Status.Migration.ExtraTokensPerSec, rr.ActualExtraPerSec)
}

func ratioOr0(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// ActualMovedPerSec is the part of To's actual extra prefill rate that is
// not the recompute of blocks only From held: ActualExtraPerSec −
// RecomputedTokens / After. It compares with the estimate's
// MovedPrefillTokensPerSec.
func (rr *ReadinessResult) ActualMovedPerSec() float64 {
	if rr.After <= 0 {
		return 0
	}
	return rr.ActualExtraPerSec - float64(rr.RecomputedTokens)/rr.After.Seconds()
}

// FromPrefillPerSec is From's prefill tokens per second in the estimate's
// window, as router 0 recorded it (the chosen instances' uncached tokens).
func (rr *ReadinessResult) FromPrefillPerSec() float64 {
	for _, d := range rr.Status.Deployments {
		if d.Name == rr.From {
			return d.PrefillTokensPerSec
		}
	}
	return 0
}
