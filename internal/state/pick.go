package state

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/prefixroute/prefixroute/scheduler"
)

// PickInput is one request to route.
type PickInput struct {
	// Hashes are the prompt's chained block hashes, first block first.
	Hashes       []uint64
	PromptTokens uint32
	// Exclude names instances not to choose. Unknown ids are ignored (the
	// instance may have been forgotten since the gateway saw it).
	Exclude []string
	// Overrides replace the router's load figures for this pick only.
	// Unknown ids are ignored.
	Overrides []Override
	// ChosenOnly asks for the instance level of the drawn deployment only
	// (scheduler.Request.ChosenOnly): the same choice and deployment audit
	// for less work, when the caller reports no other instance. The Pick
	// then usually holds the drawn deployment's instances only (see
	// Pool.Pick).
	ChosenOnly bool
	// TTFTTargetMs is the request's TTFT target in ms, 0 for none
	// (scheduler.Request.TTFTTargetMs).
	TTFTTargetMs float64
}

// Override is a gateway's own view of one instance's load; nil fields keep
// the router's value. The pointers are read during Pick only.
type Override struct {
	Instance               string
	QueuedPrefillTokens    *uint64
	QueueMs                *float64
	KVCacheUsage           *float64
	PrefillTokensPerSecond *float64
	Draining               *bool
}

// Pick is one decision with everything needed to explain it: the snapshot
// the scheduler saw, its decision, and the names behind the snapshot's
// indexes. Reuse a Pick across calls (e.g. from a sync.Pool) so a decision
// allocates nothing once the buffers have grown. Not safe for concurrent use.
type Pick struct {
	Snapshot scheduler.Snapshot
	Decision scheduler.Decision
	// Addresses parallels Snapshot.Instances. A ChosenOnly pick may hold
	// the drawn deployment's instances only (see Pool.Pick).
	Addresses []string
	// Config is the configuration the decision used.
	Config *Config
	// Approximate is true when the chosen instance reports no cache events:
	// Pick recorded the request's blocks as cached there.
	Approximate bool
	// ApproximatePrefill is the same for the prefill instance of a
	// disaggregated pick (Decision.PD.Disaggregated()).
	ApproximatePrefill bool
	// Hold is how long the caller holds its answer so that the request
	// reaches its prefill instance after the ones picked for it earlier
	// (Policy.DispatchSpacingMs, scheduler.DispatchHold); 0: answer now.
	Hold time.Duration

	recs                 []*instance
	sums                 []scheduler.Summary // scratch of pickChosen
	loads                []float64
	excl                 []uint64 // excluded order indexes (bitset)
	mask                 []uint64 // eligible slots less the excluded (bitset)
	dmask                []uint64 // the drawn deployment's slots (bitset), scratch of copyDeployment
	drops                []matchDrop
	seen                 []bool   // by deployment, scratch of summariseKept
	nodes                []uint32 // scratch of record
	matched              []int32  // matched blocks by slot (pickChosen: the drawn deployment's only)
	live, active, nextBS []uint64
	prefillWeight        float64 // scheduler.Request.PrefillWeight (backlogWeight)
	snapAssigns          uint64  // Pool.assigns when the snapshot was taken
	draws                drawLog // the first attempt's draws, replayed by a retry
}

// ValidatePick checks a pick request's sizes and figures against the limits.
func (r *Registry) ValidatePick(in *PickInput) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidPick, fmt.Sprintf(format, args...))
	}
	if len(in.Hashes) > r.limits.MaxPrefixBlocks {
		return bad("prefix_hashes has %d hashes; the limit is %d (max_prefix_blocks)", len(in.Hashes), r.limits.MaxPrefixBlocks)
	}
	if n := len(in.Exclude) + len(in.Overrides); n > r.limits.MaxExcludes {
		return bad("exclude_instances + load_snapshot.instances has %d entries; the limit is %d", n, r.limits.MaxExcludes)
	}
	for i := range in.Overrides {
		o := &in.Overrides[i]
		finite := func(v *float64) bool { return v == nil || (!math.IsNaN(*v) && !math.IsInf(*v, 0) && *v >= 0) }
		switch {
		case !finite(o.QueueMs):
			return bad("load_snapshot.instances[%d].queue_ms is %v; want a finite number >= 0", i, *o.QueueMs)
		case !finite(o.PrefillTokensPerSecond):
			return bad("load_snapshot.instances[%d].prefill_tokens_per_second is %v; want a finite number >= 0", i, *o.PrefillTokensPerSecond)
		case !finite(o.KVCacheUsage) || (o.KVCacheUsage != nil && *o.KVCacheUsage > 1):
			return bad("load_snapshot.instances[%d].kv_cache_usage is %v; want a fraction in [0, 1]", i, *o.KVCacheUsage)
		}
	}
	return nil
}

// Pick chooses an instance for one request. It copies a snapshot of the pool
// under the read lock, matches the request's prefix against the index,
// decides with no lock held, then accounts for the chosen instance's new
// work (and, for instances without cache events, records the request's
// blocks as cached there) under the write lock. Errors are the scheduler's
// sentinels; out is filled in as far as the decision got.
//
// With in.ChosenOnly and no overrides, Pick summarises the deployments from
// per-instance figures kept up to date by reports and picks and copies only
// the drawn deployment's instances (pickChosen): out.Snapshot.Instances,
// out.Addresses and out.Decision.Instances then hold those only, and
// Decision.Instance indexes them. It falls back to the full snapshot when
// the decision fails (the error's audit needs every instance) or an
// instance's figures need scheduler.Decide.
func (p *Pool) Pick(now time.Time, in *PickInput, rng scheduler.RNG, out *Pick) error {
	out.Hold = 0 // a reused Pick's, until this pick is accounted
	if err := p.checkPromptCover(in); err != nil {
		p.snapshot(now, in, out) // the audit of a refused pick, as before any decision
		return err
	}
	out.draws.start(rng)
	for attempt := 1; ; attempt++ {
		retry, err := p.pickOnce(now, in, &out.draws, out, attempt <= MaxPickRetries)
		if !retry {
			return err
		}
		out.draws.rewind()
	}
}

// pickOnce is one attempt of Pick. With mayRetry, it reports retry instead
// of accounting the decision when another pick was accounted onto the
// chosen (or prefill) instance since this attempt's snapshot.
func (p *Pool) pickOnce(now time.Time, in *PickInput, rng scheduler.RNG, out *Pick, mayRetry bool) (retry bool, err error) {
	done := false
	if in.ChosenOnly && len(in.Overrides) == 0 {
		done, err = p.pickChosen(now, in, rng, out)
		if errors.Is(err, scheduler.ErrSLODeploymentMiss) {
			// The drawn deployment cannot meet the target: whether another
			// can decides between shedding and best effort, so decide on
			// the whole pool with the same deployment draw.
			rng = &replayRNG{first: out.Decision.DeploymentDraw, rest: rng}
			done = false
		}
	}
	if !done {
		p.snapshot(now, in, out)
		err = scheduler.Decide(&out.Config.Policy, scheduler.Request{PromptTokens: in.PromptTokens, Blocks: len(in.Hashes), ChosenOnly: in.ChosenOnly,
			PrefillWeight: out.prefillWeight, TTFTTargetMs: in.TTFTTargetMs}, &out.Snapshot, rng, &out.Decision)
	}
	if err != nil {
		return false, err
	}
	rec := out.recs[out.Decision.Instance]
	tokens, ptokens := out.Work()
	if testHookBeforeAccount != nil {
		testHookBeforeAccount()
	}
	p.mu.Lock()
	if mayRetry && p.stale(out) {
		p.mu.Unlock()
		p.retries.Add(1)
		return true, nil
	}
	p.work.add(now, tokens+ptokens)
	out.Approximate, out.nodes = p.assign(rec, tokens, out.KVBlocks(), in.Hashes, out.nodes)
	out.ApproximatePrefill = false
	paced := out.Decision.Instance
	if pre := out.Decision.PD.Prefill; out.Decision.PD.Disaggregated() {
		out.ApproximatePrefill, out.nodes = p.assign(out.recs[pre], ptokens, 0, in.Hashes, out.nodes)
		paced = pre
	}
	out.Hold = p.pace(now, out.recs[paced], &out.Config.Policy, out.Decision.Instances[paced].QueueMs)
	p.mu.Unlock()
	p.tracker.Record(now, in.Hashes, in.PromptTokens, &out.Snapshot, &out.Decision)
	return false, nil
}

// assign accounts for tokens of prefill work and kvBlocks KV blocks picked
// onto rec and, when rec reports no cache events, records hashes as cached
// there. It reports whether it recorded them; nodes is scratch. Called with
// p.mu held; a rec forgotten since the snapshot is left alone.
func (p *Pool) assign(rec *instance, tokens, kvBlocks uint64, hashes []uint64, nodes []uint32) (bool, []uint32) {
	if p.slots[rec.slot] != rec {
		return false, nodes
	}
	rec.assigned += tokens
	rec.ledger.add(tokens)
	p.assigns++
	rec.assignedAt = p.assigns
	si := &p.tmpl[rec.ord]
	si.AssignedTokens = rec.assigned
	if kvBlocks > 0 {
		rec.assignedKV += kvBlocks
		si.AssignedKVUsage = scheduler.AssignedKVUsage(rec.assignedKV, rec.last.KVCapacityBlocks)
	}
	p.syncStanding(rec.ord)
	if rec.last.ReportsCacheEvents {
		return false, nodes
	}
	nodes = p.record(rec, hashes, nodes)
	p.settle()
	return true, nodes
}

// Assign applies a pick another replica made: tokens of prefill work and
// kvBlocks KV blocks on instance (its id), and, when the instance reports
// no cache events, hashes recorded as cached there. An unknown instance is ignored (not reported
// here yet, or forgotten). Safe for concurrent use.
func (p *Pool) Assign(instance string, tokens, kvBlocks uint64, hashes []uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if rec := p.byID[instance]; rec != nil {
		if !p.work.at.IsZero() {
			p.work.add(p.work.at, tokens) // dated at this replica's latest pick
		}
		p.assign(rec, tokens, kvBlocks, hashes, nil)
	}
}

// record notes hashes as cached on rec, an instance without cache events,
// as if by p.store(rec, hashes[k]) for k from the last down: the first block
// ends most recent, so eviction takes a prefix's tail before its head. When
// no block would be evicted that is one pass (blockLRU.TouchAll); else block
// by block. Called with p.mu held.
func (p *Pool) record(rec *instance, hashes []uint64, nodes []uint32) []uint32 {
	ok := false
	ok, nodes = rec.cache.TouchAll(hashes, nodes, &p.index, rec.slot)
	if ok {
		return nodes
	}
	for k := len(hashes) - 1; k >= 0; k-- {
		p.store(rec, hashes[k])
	}
	return nodes
}

// snapshot fills out.Snapshot from the pool under the read lock: the
// template copied whole, then the per-pick fields.
func (p *Pool) snapshot(now time.Time, in *PickInput, out *Pick) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	out.snapAssigns = p.assigns
	cfg := p.cfg.Load()
	out.Config = cfg
	out.prefillWeight = p.backlogWeight(now)
	words := p.index.words
	out.live = grow(out.live, words)
	out.active = grow(out.active, words)
	out.nextBS = grow(out.nextBS, words)
	out.matched = grow(out.matched, words*64)
	clear(out.live)
	copy(out.live, p.live)
	p.index.match(in.Hashes, out.live, out.matched, out.active, out.nextBS)

	out.Snapshot.Deployments = grow(out.Snapshot.Deployments, len(p.deps))
	for i, d := range p.deps {
		out.Snapshot.Deployments[i] = scheduler.Deployment{Name: d.name, Weight: d.weight, Calibration: d.calib,
			Unweighted: cfg.Weights != nil && !d.configured}
	}
	n := len(p.order)
	insts := grow(out.Snapshot.Instances, n)
	out.Snapshot.Instances = insts
	out.Addresses = grow(out.Addresses, n)
	out.recs = grow(out.recs, n)
	copy(insts, p.tmpl)
	copy(out.Addresses, p.addrs)
	copy(out.recs, p.order)
	matched, tslot, tlast := out.matched, p.tslot[:n], p.tlast[:n]
	nowRel, fast := p.relTime(now)
	for i := range insts {
		si := &insts[i]
		si.MatchedBlocks = int(matched[tslot[i]])
		if last := tlast[i]; fast && last != noAge {
			si.ReportAge = time.Duration(max(0, nowRel-last))
		} else {
			si.ReportAge = max(0, now.Sub(p.order[i].lastReport))
		}
	}
	for _, id := range in.Exclude {
		if rec := p.byID[id]; rec != nil {
			insts[rec.ord].Excluded = true
		}
	}
	for k := range in.Overrides {
		o := &in.Overrides[k]
		rec := p.byID[o.Instance]
		if rec == nil {
			continue
		}
		si := &insts[rec.ord]
		if o.QueuedPrefillTokens != nil {
			si.QueuedPrefillTokens, si.HasQueueMs = *o.QueuedPrefillTokens, false
		}
		if o.QueueMs != nil {
			si.QueueMs, si.HasQueueMs = *o.QueueMs, true
		}
		if o.KVCacheUsage != nil {
			si.KVUsage = *o.KVCacheUsage
		}
		if o.PrefillTokensPerSecond != nil {
			si.PrefillTokensPerSecond = *o.PrefillTokensPerSecond
		}
		if o.Draining != nil {
			si.Draining = *o.Draining
		}
	}
}

// grow returns s with length n, reusing its array when it is large enough.
func grow[T any](s []T, n int) []T {
	if cap(s) >= n {
		return s[:n]
	}
	return make([]T, n, n+n/4)
}

// checkPromptCover returns an error wrapping ErrInvalidPick when the
// request's prompt_tokens are fewer than its prefix hashes cover: hashes
// are of full blocks, so the prompt has at least blocks × the smallest
// block size in force (an instance's reported block_size_tokens, or the
// policy's for those reporting none). A prompt that covers the policy's
// block size, the usual case, is decided without the lock; otherwise the
// instances' block sizes are read under the read lock.
func (p *Pool) checkPromptCover(in *PickInput) error {
	blocks := uint64(len(in.Hashes))
	if blocks == 0 {
		return nil
	}
	bs := p.cfg.Load().Policy.BlockSizeTokens
	if uint64(in.PromptTokens) >= blocks*uint64(bs) {
		return nil
	}
	p.mu.RLock()
	for i := range p.tmpl {
		if b := p.tmpl[i].BlockSizeTokens; b > 0 && b < bs {
			bs = b
		}
	}
	p.mu.RUnlock()
	if covered := blocks * uint64(bs); uint64(in.PromptTokens) < covered {
		return fmt.Errorf("%w: prompt_tokens is %d, fewer than the %d tokens its %d prefix_hashes cover (%d blocks × %d-token blocks); send the prompt's length in tokens",
			ErrInvalidPick, in.PromptTokens, covered, blocks, blocks, bs)
	}
	return nil
}

// Work returns the prefill work, in work tokens, that pk's decision adds
// to its instance (decode) and to its prefill instance. A local pick adds
// the chosen instance's WorkTokens to it and prefill is 0; a
// disaggregated one (Decision.PD.Disaggregated()) adds the prefill
// instance's WorkTokens to the prefill instance and none to the decode
// one, which only receives the KV (its blocks are recorded as cached there
// like the prefill instance's, for instances without cache events).
func (pk *Pick) Work() (decode, prefill uint64) {
	d := &pk.Decision
	if pre := d.PD.Prefill; d.PD.Disaggregated() {
		return 0, uint64(d.Instances[pre].WorkTokens)
	}
	return uint64(d.Instances[d.Instance].WorkTokens), 0
}

// KVBlocks returns the KV blocks pk's decision adds to its (decode)
// instance until the instance's next report: scheduler.KVBlocks of the
// uncached tokens there, at its block size (the policy's when it reports
// none). In a disaggregated pick they are the blocks the prefill instance
// transfers.
func (pk *Pick) KVBlocks() uint64 {
	i := pk.Decision.Instance
	bs := pk.Snapshot.Instances[i].BlockSizeTokens
	if bs == 0 {
		bs = pk.Config.Policy.BlockSizeTokens
	}
	return scheduler.KVBlocks(pk.Decision.Instances[i].UncachedTokens, bs)
}

// pace returns the dispatch hold of a pick for rec priced behind aheadMs of
// queue (scheduler.DispatchHold) and notes when its answer leaves. Called
// with p.mu held; a rec forgotten since the snapshot is not held.
func (p *Pool) pace(now time.Time, rec *instance, pol *scheduler.Policy, aheadMs float64) time.Duration {
	if pol.DispatchSpacingMs <= 0 || p.slots[rec.slot] != rec {
		return 0
	}
	spacing := time.Duration(pol.DispatchSpacingMs * float64(time.Millisecond))
	hold := scheduler.DispatchHold(now, rec.answered, spacing, aheadMs)
	rec.answered = now.Add(hold)
	return hold
}
