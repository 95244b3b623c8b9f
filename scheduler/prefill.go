package scheduler

import "math"

// DefaultDoublingContextTokens is Policy.DoublingContextTokens by default:
// 17,000 tokens, the context at which a new token's prefill costs double
// for the Llama-3.1-8B shape on one H200 (FlexAttention; measured in the
// project's data/prefill-h200, whose fit is b/k = 0.023 ms / 1.4e-6 ms).
const DefaultDoublingContextTokens = 17000

// Bounds of Policy.DoublingContextTokens when on: [256, 100000000] tokens.
// Below 256 the attention term would dominate every prompt, which no
// measured shape shows (the 1B shape's is 5,200).
const (
	MinDoublingContextTokens = 256
	MaxDoublingContextTokens = 1e8
)

// PrefillWork is the prefill work of u new tokens on top of c cached ones,
// in tokens at an empty context (the unit a throughput in tokens/s
// divides):
//
//	PrefillWork(u, c, C) = u · (1 + (c + u/2) / C)
//
// Every new token costs its dense part (1) plus its attention to the keys
// before it: the c cached ones and, on average, half of the u new ones;
// that term equals the dense part once the context reaches C, the doubling
// context. C = 0 turns the attention term off (u, the linear model). It is
// the integral of 1 + x/C over the new tokens' positions x in [c, c + u],
// the form `ms = b·u + k·u·(c + u/2)` the data README fits, with C = b/k.
// Pure; safe for concurrent use.
func PrefillWork(u, c uint32, doublingContext float64) float64 {
	w := float64(u)
	if doublingContext > 0 {
		w += w * (float64(c) + 0.5*w) / doublingContext
	}
	return w
}

// PrefillMs is the time to prefill u new tokens on top of c cached ones at
// tps tokens/s with doubling context C: PrefillWork(u, c, C) · 1000 / tps.
// The one prefill model of the router (instance costs, the work a pick
// adds to the queue between reports, the queue ledger, the backlog
// utilisation, saturation drain times) and of the simulator's instances.
// Pure; safe for concurrent use.
func PrefillMs(u, c uint32, doublingContext, tps float64) float64 {
	return PrefillWork(u, c, doublingContext) * 1000 / tps
}

// WorkTokens is PrefillWork rounded to whole tokens, at most MaxUint32: the
// unit in which a state layer sums the work it assigned to an instance
// (AssignedTokens, the ledger, the rate of picked work). Pure; safe for
// concurrent use.
func WorkTokens(u, c uint32, doublingContext float64) uint32 {
	return uint32(min(math.Round(PrefillWork(u, c, doublingContext)), math.MaxUint32))
}

// DoublingContextPrior is the doubling context C that a model's shape
// predicts, for a model whose transformer layers hold weightsPerLayer
// parameters each over a hidden size dModel:
//
//	C ≈ weightsPerLayer / (2 · dModel) / 1.6
//
// A new token's dense work per layer is 2 FLOPs per weight; its attention
// to one key is 4·dModel FLOPs (scores and values), so the attention term
// equals the dense one after weightsPerLayer/(2·dModel) keys; the
// attention kernels measured ran 1.6× slower per FLOP than the dense
// products (data/prefill-h200: the 8B shape, 218M weights per layer and
// dModel 4096, gives 218M/8192/1.6 = 16.6k against 17,000 measured; the
// 70B shape, 856M and 8192, 32.7k against 33,500). 0 when either figure
// is 0. Pure; safe for concurrent use.
func DoublingContextPrior(weightsPerLayer float64, dModel uint32) float64 {
	if weightsPerLayer <= 0 || dModel == 0 {
		return 0
	}
	return weightsPerLayer / (2 * float64(dModel)) / 1.6
}
