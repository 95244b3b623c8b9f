package readiness

import "time"

// Status is the readiness report of one pool for one Query: the window's
// figures per deployment, the cost of moving From's traffic To, and the hot
// prefixes only From holds. Every float is finite and ≥ 0 except
// Migration.HeadroomPct, which may be negative; a ratio or rate whose
// denominator is 0 is 0. Rates are per second of Covered. It is a plain
// value.
type Status struct {
	// Now is the time the report is for.
	Now time.Time
	// Window is the configured window. Covered is the time it actually
	// covers: from the start of its oldest bucket, or from the first
	// Record when the tracker is younger than that, to Now. It is in
	// [Window − Window/Buckets, Window) once the tracker is old enough, less
	// for a younger tracker, and 0 before the first Record.
	Window, Covered time.Duration
	// Picks and PromptTokens are the pool's recorded picks and their prompt
	// tokens in the window, every deployment included.
	Picks, PromptTokens uint64
	// UntrackedPicks counts the window's picks on deployments beyond
	// Config.MaxDeployments: they are in Picks and PromptTokens only, and a
	// deployment with Tracked false has no window figures.
	UntrackedPicks uint64
	// LateRecords counts Records dropped since New as older than the
	// window (a clock stepping back).
	LateRecords uint64
	// Deployments lists the pool's deployments now (Live) and those tracked
	// in the window, From and To included, sorted by name.
	Deployments []DeploymentStatus
	// Migration is the cost of moving From's traffic To.
	Migration Migration
	// HotPrefixes lists at most Query.TopK hot prefixes cached deeper on
	// From than on To now, by Requests (descending), then FirstBlockHash.
	HotPrefixes []HotPrefix
}

// DeploymentStatus is one deployment's figures. It is a plain value.
type DeploymentStatus struct {
	Name string
	// Live is true when the deployment is in the pool now (Live), Tracked
	// when the window has figures for it (a tracked slot named by a pick
	// inside the window).
	Live, Tracked bool
	// Weight is the operator weight in force; WeightShare is Weight over
	// the sum of the live deployments' weights (a fraction in [0, 1]).
	Weight, WeightShare float64
	// Instances counts its eligible instances now;
	// ThroughputTokensPerSec is their reported prefill throughput summed,
	// in tokens/s.
	Instances              int
	ThroughputTokensPerSec float64
	// Missing says which side a disaggregated deployment lacks to take
	// traffic ("no eligible prefill instance (of 2)", "no eligible decode
	// instance"), "" when it lacks none or has no prefill instances.
	Missing string
	// Picks counts the window's picks that chose it; TrafficShare is Picks
	// over the pool's Picks (a fraction).
	Picks        uint64
	TrafficShare float64
	// PromptTokens are those picks' prompt tokens; HitTokens the tokens
	// cached on the chosen instance (its matched blocks × block size, at
	// most the prompt); HitRatio = HitTokens / PromptTokens.
	PromptTokens, HitTokens uint64
	HitRatio                float64
	// PrefillTokens are the chosen instances' uncached tokens (the prefill
	// work sent), PrefillTokensPerSec the same per second of Covered.
	PrefillTokens       uint64
	PrefillTokensPerSec float64
	// PrefillMs is the chosen instances' estimated prefill time, in ms;
	// PrefillMsPerSec the same per second of Covered, in ms/s (1000 ms/s
	// keeps one instance busy).
	PrefillMs, PrefillMsPerSec float64
}

// Migration estimates what To must absorb if From's weight went to 0 now.
// It is a plain value.
type Migration struct {
	From, To string
	// Tracked is true when both have window figures; otherwise the pair
	// figures below are 0 (incomplete).
	Tracked bool
	// CachedRequests counts the window's picks chosen on From whose prefix
	// matched deeper on From than on To (MatchedBlocks of the decision);
	// CachedRequestShare is it over the pool's Picks. CachedPromptTokens
	// are their prompt tokens, CachedPromptShare that over the pool's
	// PromptTokens.
	CachedRequests     uint64
	CachedRequestShare float64
	CachedPromptTokens uint64
	CachedPromptShare  float64
	// ToFraction is the fraction f of From's traffic To would get with
	// From at weight 0: To's weight over the sum of the live weights of
	// every deployment but From; 1 when that sum is 0 (nothing else is
	// weighted: To is assumed to take it all once weighted).
	ToFraction float64
	// MovedPrefillTokens is From's PrefillTokens in the window: what
	// From's chosen instances prefilled for its picks, in tokens, the
	// steady prefill To inherits with those picks (To's instances, chosen
	// by load as From's were, miss what the chosen one lacks just as
	// often). MovedPrefillTokensPerSec = f × MovedPrefillTokens / Covered,
	// tokens/s.
	MovedPrefillTokens       uint64
	MovedPrefillTokensPerSec float64
	// RecomputeHorizon is the part of Covered the recompute estimate
	// looks at: the most recent Config.RecomputeHorizon (whole buckets),
	// less for a younger tracker; ≤ Covered.
	RecomputeHorizon time.Duration
	// DistinctBlocks estimates (HyperLogLog, Config.SketchPrecision) the
	// distinct blocks hashes[matched_To:] of From's picks in the last
	// RecomputeHorizon: every block of those prompts To lacked, the ones
	// From had cached and the ones From prefilled for the pick (and so
	// holds after it). RecomputeTokens = f × DistinctBlocks × From's
	// block size: the one-off warm-up debt, what To recomputes once each
	// for the prefixes in use on From now, in tokens;
	// RecomputeTokensPerSec is it spread over Covered (paid off within one
	// window), in tokens/s. It overstates the debt by the blocks To has
	// cached since and by prefixes whose last request was in the horizon,
	// and misses From's blocks no pick in the horizon carried.
	DistinctBlocks        uint64
	RecomputeTokens       float64
	RecomputeTokensPerSec float64
	// ExtraTokensPerSec = MovedPrefillTokensPerSec + RecomputeTokensPerSec,
	// the prefill To would gain, in tokens/s.
	ExtraTokensPerSec float64
	// ToTokensPerMs is To's mean per-instance prefill throughput in
	// tokens/ms (throughput / instances / 1000; 0 when unknown).
	// ExtraPrefillMsPerSec = ExtraTokensPerSec / ToTokensPerMs, in ms/s;
	// ExtraPrefillMsKnown is false (and it 0) when To reports no
	// throughput or has no eligible instance (or the quotient overflows).
	ToTokensPerMs        float64
	ExtraPrefillMsPerSec float64
	ExtraPrefillMsKnown  bool
	// ToPrefillMsPerSec is To's current prefill load (its PrefillMsPerSec);
	// ToCapacityMsPerSec = 1000 × To's eligible instances, in ms/s.
	ToPrefillMsPerSec  float64
	ToCapacityMsPerSec float64
	// HeadroomPct = 100 × (1 − (ToPrefillMsPerSec + ExtraPrefillMsPerSec) /
	// ToCapacityMsPerSec), in percent, negative when To would be
	// overloaded; HeadroomKnown is false (and it 0) when the capacity is 0,
	// the extra ms unknown, or the figures overflow. CanAbsorb = HeadroomKnown && HeadroomPct ≥ 0
	// && ToMissing == "".
	HeadroomPct   float64
	HeadroomKnown bool
	CanAbsorb     bool
	// ToMissing is To's DeploymentStatus.Missing: a disaggregated To
	// without both sides cannot absorb anything (a ramp toward it holds).
	ToMissing string
}

// HotPrefix is one hot prefix cached deeper on From than on To. It is a
// plain value.
type HotPrefix struct {
	// FirstBlockHash keys the prefix; Blocks is the length of the longest
	// chain kept for it (≤ Config.MaxHotBlocks).
	FirstBlockHash uint64
	Blocks         int
	// DepthFrom and DepthTo are that chain's depth cached now (Live.Depth)
	// on one eligible instance of From and of To, in blocks.
	DepthFrom, DepthTo int
	// Requests counts the window's requests with this first block;
	// Overestimate bounds how many of them were inherited from an evicted
	// prefix (Space-Saving: Requests − Overestimate ≤ true ≤ Requests
	// while no bucket expires; see the package doc).
	Requests, Overestimate uint64
	// PromptTokens is the last such request's prompt length.
	PromptTokens uint32
	// ExtraTokens = (DepthFrom − DepthTo) × block size: what To would
	// prefill for it that From has cached, in tokens.
	ExtraTokens uint64
}
