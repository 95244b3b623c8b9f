// Package readiness is the migration-readiness tracker of a pool: it answers
// step 3 of the design's cutover ("can B take all traffic plus the
// recompute of prefixes only A holds?") from what the router sees of its own
// picks, and lists the hot prefixes still cached only on A, to replay for
// warm-up.
//
// It is pure and deterministic: no clock (every method takes now), no
// goroutines, no gRPC; it reads the scheduler's Snapshot and Decision. One
// Tracker serves one pool and is safe for concurrent use (its own short
// mutex); everything else is a plain value.
//
//	tr := readiness.New(readiness.Config{})            // defaults
//	tr.Record(now, hashes, promptTokens, &snap, &dec)  // after every pick
//	st, err := tr.Status(now, readiness.Query{From: "a", To: "b"}, live)
//
// # What a pick records
//
// The window (Config.Window, default 5 min) is a ring of Config.Buckets
// buckets (default 60 of 5 s); Status sums the buckets inside the window
// ending at now and divides by the time they cover (Status.Covered). Per
// bucket the tracker keeps, with a the chosen deployment, m_d the
// decision's MatchedBlocks of deployment d (its longest matched prefix over
// its eligible instances) and bs the chosen instance's block size:
//
//   - the pool: picks, prompt tokens, picks on untracked deployments;
//   - each tracked deployment (Config.MaxDeployments, default 8), over the
//     picks that chose it: picks, prompt tokens, hit tokens (chosen
//     instance's matched blocks × bs, at most the prompt), prefill tokens
//     (its UncachedTokens) and prefill ms (its PrefillMs);
//   - each ordered pair (a, b ≠ a) of the snapshot: the picks with m_a > m_b
//     and their prompt tokens; and, over every pick on a, a HyperLogLog
//     sketch of the blocks hashes[m_b:], those b lacks: the ones a holds
//     and the ones a prefills for the pick (and then holds), which b
//     must recompute once each;
//   - the hot-prefix table (Config.HotPrefixes, default 256): Space-Saving
//     keyed by the first block hash with per-bucket counts, the longest
//     chain seen (at most Config.MaxHotBlocks) and the last prompt length.
//
// # What Status derives for From → To
//
// With f = w_To / Σ_{d≠From} w_d (1 when that sum is 0) the share of From's
// traffic To would get at From's weight 0, and C the covered seconds:
//
//	moved     = f · From's prefill tokens / C                tokens/s
//	recompute = f · distinct_H(From→To) · bs                 tokens (one-off)
//	extra     = moved + recompute / C                        tokens/s
//	extra ms  = extra / (To's throughput / instances / 1000) ms/s
//	headroom  = 100 · (1 − (To's prefill ms/s + extra ms) / (1000 · instances)) %
//
// where distinct_H counts the sketch over only the most recent
// Config.RecomputeHorizon of the window (default a quarter; the buckets'
// sketches are merged at Status time, so the horizon costs Record
// nothing), and CanAbsorb when the headroom is known and ≥ 0.
//
// Why these: the debt that arrives after a cutover is the blocks From
// holds that are requested again soon (in the simulator's ramped cutover
// two thirds or more of two windows' recompute arrives in the first). Blocks of
// prefixes From served long ago are mostly finished conversations that
// never come back: counting the whole window overstated the debt 1.2-4.8×
// there. A pick's own new blocks (its uncached suffix, which From writes)
// are the next turn's history, so they count too. The moved term is From's
// recorded prefill rather than "prompt − the deepest match of either
// deployment": To's load-balanced instances do not hit the deepest match
// any more than From's did (that figure was half the measured rate). Every ratio with a zero
// denominator is 0, an unknown throughput is reported as unknown
// (Migration.ExtraPrefillMsKnown), never as an infinity.
//
// # Distinct blocks
//
// The sketches are github.com/axiomhq/hyperloglog's dense representation
// (precision Config.SketchPrecision, default 12: 4 KiB per bucket and
// ordered pair seen, relative standard error 1.04/√4096 ≈ 1.6%). The
// tracker updates the registers itself, identically to the library's
// InsertHash on the already uniform xxh3 block hashes, and merges the
// window's buckets and asks the library for the estimate at Status time;
// sketch.go says why (the library's sparse mode allocates on the hot path,
// its dense InsertHash costs 2 µs for a 256-block prefix). The dense
// estimator (LogLog-Beta) is near-exact for small counts: at precision 12,
// over 200 seeded streams, exact up to 5 distinct blocks, within 1 up to
// 20, within 3 up to 100 (TestSketchSmallCounts); the library's exact
// sparse mode is what costs the allocations.
//
// # Hot prefixes
//
// See hotTable for the Space-Saving bound. Status asks Live for each
// entry's depth on From and To now, keeps those deeper on From, and sorts
// them by windowed requests.
package readiness
