// Package scheduler is the pure scheduling math of prefixroute: given a
// pool's state and one request, it computes the two-level probability model
// of docs/model.md (after the seed write-up) and draws an instance.
// It has no clock, no goroutines, no mutable global state and no dependency
// outside the standard library; randomness comes from an injected RNG, so the
// same state, policy and RNG seed give the same decision.
//
// # Contract
//
// The caller (the server's state layer) builds a Snapshot of the pool —
// deployments with their operator weights, instances with their latest load
// report, the request's matched prefix length on each and the work the
// router assigned since that report — and calls
//
//	err := scheduler.Decide(&policy, req, &snap, rng, &decision)
//
// Decide fills the Decision with the chosen deployment and instance and an
// audit of every deployment and instance: weight, hit ratio, P(d); cost
// parts, P(i|d), Joint = P(d)·P(i|d) and, for those with probability 0, the
// Reason. With Request.ChosenOnly it computes P(i|d) for the drawn
// deployment only (the instance level never changes a deployment's share),
// everything else exactly as the full audit. Errors are the sentinels of
// this package (errors.Is). A reused
// Decision makes Decide allocation-free. Policy values come from
// DefaultPolicy and are checked by Policy.Validate. Everything is safe for
// concurrent use as long as each goroutine has its own Decision and RNG;
// Policy and Snapshot are only read.
//
// # The model
//
// The probability of instance i of deployment d is
//
//	P(d,i) = P(d) · P(i|d),   Σ_{i∈d} P(i|d) = 1,
//
// so the instance level never changes a deployment's share.
//
// Instances first pass eligibility checks, in the order of the Reason
// constants: connected, fresh (ReportAge <= StaleAfter), not draining, not
// excluded by the request, KVUsage + AssignedKVUsage < MaxKVUsage, queue under MaxQueueMs
// (when set). The cost of instance i, in ms, is the least-workload view
//
//	S_i = prefill_ms(uncached tokens) + queue_ms + batch_wait_ms
//	uncached = max(0, PromptTokens − MatchedBlocks·block_size)
//	prefill_ms(n) = n / (prefill_tokens_per_second/1000)
//	queue_ms = (reported queue ms, else queued tokens / tokens per ms) + assigned tokens / tokens per ms
//
// Deployment level (the seed's cutover rule): with H_d the longest matched
// prefix over d's eligible instances divided by Request.Blocks,
//
//	P(d) = w_d·2^(λ_h·H_d) / Σ_k w_k·2^(λ_h·H_k)
//
// over the deployments with an eligible instance and w_d > 0. With weights
// 1:9, A fully hit, B cold and λ_h = 10, P(B) = 9/(2^10+9) ≈ 0.87%; a prefix
// cold on both splits 1:9. The optional load term (DeploymentDeltaMs = δ_d
// > 0) multiplies each term by 2^(−(L_d − L_min)/δ_d), L_d being the soft-min
// −δ_d·log2(mean_i 2^(−q_i/δ_d)) of the eligible instances' queue_ms +
// batch_wait_ms; with it off the seed's formula holds exactly.
//
// Instance level, among d's eligible instances, by Policy.Strategy:
//
//   - Softmax: P(i|d) = 2^(−S_i/Δ) / Σ_j 2^(−S_j/Δ), Δ = DeltaMs. Each Δ ms
//     of extra cost halves the odds: costs 100 and 120 ms at Δ = 20 give 2/3
//     and 1/3, a 40 ms gap gives 0.8 and 0.2. It equals softmax(−S/τ) with
//     τ = Δ/ln 2 and is the exact minimiser of Σ p_i·S_i + τ·KL(p‖uniform).
//   - Threshold (RTP-LLM FlexLB): uniform over the instances with
//     S_i − S_min <= max(ThresholdRatio·S_min, ThresholdMinMs).
//   - Argmin: uniform over the instances with S_i == S_min.
//
// Every exponential is computed after subtracting the largest exponent
// (log-sum-exp), so costs of 1e−6 ms or 1e6 ms, any finite weights and
// λ_h up to 100 give finite probabilities that sum to 1.
//
// Saturation: when no instance is eligible but some failed only the load
// checks (KVUsage, queue), Policy.OnSaturation decides: SaturationLeastLoaded
// picks the cheapest of those (Decision.Saturated), SaturationShed returns
// ErrSaturated; Decision.DrainMs estimates when the first one drains.
//
// The first RNG draw picks the deployment by cumulative P(d), the second the
// instance by cumulative P(i|d); a draw past the last cumulative sum picks the
// last entry with a positive probability.
//
// Backlog weight (backlog.go): a state layer sets Request.PrefillWeight to
// BacklogWeight of its pool, the larger of 1 + the fewest waiting requests
// of any instance and 1 + ρ/(1 − ρ)², the M/M/1 externality of a unit of
// work at the pool's prefill utilisation ρ (Utilisation: the larger of the
// tokens picked per second of throughput and the share of busy instances,
// both averaged over UtilisationTau), at most MaxBacklogWeight. It favours
// cache hits as the pool fills.
//
// Queue ledger (ledger.go): the queue an instance reports is capped by the
// predicted uncached tokens of its latest picks (LedgerQueue), since engines
// report waiting requests' whole prompts.
//
// Policy fields (policy_fields.go): PolicyFields lists every Policy field
// with its key, unit, range and accessor; the proto conversion, the state
// file, the simulator's YAML and prefixctl are driven by it.
//
// Optimistic accounting, the prefix index, the sums the backlog weight reads
// and the ledgers live in the state layer (internal/state): it adds the
// chosen instance's InstanceResult.WorkTokens to that instance's
// AssignedTokens until its next report.
package scheduler
