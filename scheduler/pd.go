package scheduler

import (
	"errors"
	"fmt"
)

// Role is an instance's role under prefill/decode disaggregation. A plain
// value, safe for concurrent use.
type Role uint8

const (
	// RoleBoth prefills and decodes: an aggregated instance. The zero
	// value, today's behaviour.
	RoleBoth Role = iota
	// RolePrefill only prefills, for decode instances of its deployment
	// (vLLM kv_role kv_producer, SGLang --disaggregation-mode prefill).
	RolePrefill
	// RoleDecode decodes, and prefills locally when no prefill instance
	// pays (vLLM kv_role kv_consumer, SGLang --disaggregation-mode decode).
	RoleDecode
	numRoles
)

var roleNames = [numRoles]string{RoleBoth: "both", RolePrefill: "prefill", RoleDecode: "decode"}

// String returns "both", "prefill" or "decode", and "Role(N)" for an
// unknown value.
func (r Role) String() string { return nameOf(roleNames[:], int(r), "Role") }

// ParseRole parses "both", "prefill" or "decode" (case and surrounding
// spaces ignored; "" is both). The boolean is false for any other string.
func ParseRole(s string) (Role, bool) {
	if s == "" {
		return RoleBoth, true
	}
	i, ok := lookupName(roleNames[:], s)
	return Role(i), ok
}

// PDFallback is what a pick does when it would use a prefill instance but
// the drawn deployment has none eligible. A plain value.
type PDFallback uint8

const (
	// PDFallbackLocal prefills on the decode instance (the default); the
	// reason stays in Decision.PD.
	PDFallbackLocal PDFallback = iota
	// PDFallbackFail fails the decision with ErrNoPrefillInstance or
	// ErrPrefillSaturated.
	PDFallbackFail
	numPDFallbacks
)

var pdFallbackNames = [numPDFallbacks]string{PDFallbackLocal: "local", PDFallbackFail: "fail"}

// String returns "local" or "fail", and "PDFallback(N)" for an unknown value.
func (f PDFallback) String() string { return nameOf(pdFallbackNames[:], int(f), "PDFallback") }

// PDMode says which picks of a deployment with prefill instances go to a
// prefill instance. A plain value.
type PDMode uint8

const (
	// PDConditional disaggregates a pick when it pays (the default):
	// RemoteMs < LocalMs + InterferenceMs, with at least
	// max(1, Policy.PDMinUncachedTokens) tokens uncached on the decode
	// instance or, below that, InterferenceMs > RemoteMs (decidePD).
	PDConditional PDMode = iota
	// PDAlways disaggregates every pick that has an eligible prefill
	// instance, for decode engines that never prefill (SGLang's
	// --disaggregation-mode decode, Dynamo's --router-mode direct).
	// PDFallback decides when there is none.
	PDAlways
	numPDModes
)

var pdModeNames = [numPDModes]string{PDConditional: "conditional", PDAlways: "always"}

// String returns "conditional" or "always", and "PDMode(N)" for an unknown
// value.
func (m PDMode) String() string { return nameOf(pdModeNames[:], int(m), "PDMode") }

// PDReason is the outcome of the prefill stage. A plain value.
type PDReason uint8

// The prefill stage's outcomes, in the order Decide checks them. Map them by
// name (PDReason.String).
const (
	// PDNone: the drawn deployment has no prefill instance (aggregated);
	// the stage did not run.
	PDNone PDReason = iota
	// PDBelowThreshold: fewer than max(1, Policy.PDMinUncachedTokens)
	// prompt tokens are uncached on the decode instance, and the stall a
	// local prefill puts on the decodes running there does not outweigh
	// the best prefill instance (PDResult: InterferenceMs ≤ RemoteMs, or no
	// eligible prefill instance; PDConditional only).
	PDBelowThreshold
	// PDNoPrefillInstance: no prefill instance is eligible, none only for
	// load.
	PDNoPrefillInstance
	// PDPrefillSaturated: no prefill instance is eligible, some only for
	// load (kv_full, queue_full).
	PDPrefillSaturated
	// PDLocalCheaper: prefilling on the decode instance, with the stall it
	// puts on the decodes running there, costs no more than the best prefill
	// instance plus the KV transfer (PDResult: LocalMs + InterferenceMs ≤
	// RemoteMs; PDConditional only).
	PDLocalCheaper
	// PDDisaggregated: a prefill instance was chosen.
	PDDisaggregated
	NumPDReasons // the number of outcomes; not one
)

var pdReasonNames = [NumPDReasons]string{
	PDNone:              "",
	PDBelowThreshold:    "below_threshold",
	PDNoPrefillInstance: "no_prefill_instance",
	PDPrefillSaturated:  "prefill_saturated",
	PDLocalCheaper:      "local_cheaper",
	PDDisaggregated:     "disaggregated",
}

// String returns the outcome as a snake_case word ("disaggregated",
// "below_threshold", ...), "" for PDNone and "PDReason(N)" for an unknown
// value.
func (r PDReason) String() string { return nameOf(pdReasonNames[:], int(r), "PDReason") }

// Errors of the prefill stage under PDFallbackFail (test with errors.Is).
var (
	// ErrNoPrefillInstance: the request would use a prefill instance but
	// none of the drawn deployment's is eligible, none only for load.
	ErrNoPrefillInstance = errors.New("scheduler: no eligible prefill instance")
	// ErrPrefillSaturated: as ErrNoPrefillInstance, with some prefill
	// instances excluded only for load (kv_full, queue_full).
	ErrPrefillSaturated = errors.New("scheduler: every live prefill instance is saturated")
)

// PDResult is the audit of the prefill stage of a Decision. A plain value.
type PDResult struct {
	// Reason is the stage's outcome; PDNone when it did not run.
	Reason PDReason
	// Prefill is the index of the chosen prefill instance in the snapshot,
	// -1 when none (every outcome but PDDisaggregated).
	Prefill int
	// PrefillProbability is P(p|d) of the chosen prefill instance among
	// the deployment's eligible prefill instances (weighed by CostMs under
	// Policy.Strategy, as the decode level weighs instances); 0 when none.
	PrefillProbability float64
	// PrefillDraw is the third draw, made only for PDDisaggregated.
	PrefillDraw float64
	// PrefillInstances counts the drawn deployment's RolePrefill instances;
	// PrefillEligible those that pass the eligibility checks (role aside).
	PrefillInstances int
	PrefillEligible  int
	// UncachedTokens are the prompt tokens uncached on the decode instance.
	UncachedTokens uint32
	// LocalMs is the predicted TTFT prefilling on the decode instance:
	// its PrefillMs + QueueMs + BatchWaitMs. RemoteMs is the least
	// PrefillMs + QueueMs + BatchWaitMs over the eligible prefill
	// instances plus TransferMs (0 when none is eligible); TransferMs =
	// Policy.PDTransferMsPerToken × UncachedTokens. All in ms.
	LocalMs    float64
	RemoteMs   float64
	TransferMs float64
	// RunningRequests is the decode instance's Instance.RunningRequests.
	// InterferenceMs is the stall a local prefill puts on them, priced in
	// TTFT: Policy.PDInterferenceWeight × RunningRequests × the decode
	// instance's PrefillMs, in ms. The stage stays local (PDLocalCheaper)
	// iff LocalMs + InterferenceMs ≤ RemoteMs.
	RunningRequests uint32
	InterferenceMs  float64
}

// stallsLocal reports whether a prefill below the threshold still goes to
// a prefill instance: there is an eligible one (eligible) and the stall
// a local prefill would put on the running decodes alone costs more than
// the whole remote path (InterferenceMs > RemoteMs). Without it, a decode
// pool near its limit keeps prefilling short turns locally, each stall
// makes every running decode hold its slot longer, and the slots fill
// (SIMULATION.md section 8, pd-mixed-busy).
func (r *PDResult) stallsLocal(eligible bool) bool { return eligible && r.InterferenceMs > r.RemoteMs }

// LocalCostMs is what the stage weighs a local prefill at against RemoteMs:
// LocalMs + InterferenceMs, in ms.
func (r *PDResult) LocalCostMs() float64 { return r.LocalMs + r.InterferenceMs }

// decidePD runs the prefill stage after the decode instance d.Instance of
// deployment d.Deployment was drawn. When that deployment has RolePrefill
// instances it decides, in this order: below the threshold, unless
// InterferenceMs > RemoteMs (stallsLocal) → local; no
// eligible prefill instance → local under PDFallbackLocal, else the error;
// LocalMs + InterferenceMs ≤ RemoteMs → local (PDAlways skips the first
// and the last); else it weighs the eligible prefill
// instances by their CostMs under p.Strategy (as instanceWeights does) and
// draws one with a third draw from rng (drawPrefill).
// Without prefill instances it only sets d.PD to PDNone. On error
// d.Deployment = d.Instance = -1.
func decidePD(p *Policy, snap *Snapshot, rng RNG, d *Decision) error {
	dep, dec := d.Deployment, d.Instance
	d.PD = PDResult{Prefill: -1}
	if d.Excluded[ReasonPrefillRole] == 0 {
		return nil // not one prefill instance in the pool: aggregated
	}
	best, loadOnly := -1, 0
	d.prefills = d.prefills[:0]
	for i := range snap.Instances {
		in := &snap.Instances[i]
		if in.Deployment != dep || in.Role != RolePrefill {
			continue
		}
		d.PD.PrefillInstances++
		r := &d.Instances[i]
		switch serveEligibility(p, in, r.QueueMs) {
		case ReasonNone:
			d.PD.PrefillEligible++
			d.prefills = append(d.prefills, int32(i))
			if best < 0 || ttft(r) < ttft(&d.Instances[best]) {
				best = i
			}
		case ReasonKVFull, ReasonQueueFull:
			loadOnly++
		}
	}
	if d.PD.PrefillInstances == 0 {
		return nil
	}
	rd := &d.Instances[dec]
	pd := &d.PD
	pd.UncachedTokens = rd.UncachedTokens
	pd.LocalMs = ttft(rd)
	pd.RunningRequests = snap.Instances[dec].RunningRequests
	pd.InterferenceMs = p.PDInterferenceWeight * float64(pd.RunningRequests) * rd.PrefillMs
	pd.TransferMs = p.PDTransferMsPerToken * float64(rd.UncachedTokens)
	if best >= 0 {
		pd.RemoteMs = ttft(&d.Instances[best]) + pd.TransferMs
	}
	conditional := p.PDMode == PDConditional
	switch {
	case conditional && rd.UncachedTokens < max(1, p.PDMinUncachedTokens) && !pd.stallsLocal(best >= 0):
		pd.Reason = PDBelowThreshold
	case best < 0:
		pd.Reason = PDNoPrefillInstance
		if loadOnly > 0 {
			pd.Reason = PDPrefillSaturated
		}
		if p.PDFallback == PDFallbackFail {
			d.Deployment, d.Instance = -1, -1
			if loadOnly > 0 {
				return fmt.Errorf("%w: deployment %q: %d prefill instances, %d saturated (kv_full, queue_full), none eligible (pd_fallback: fail)",
					ErrPrefillSaturated, snap.Deployments[dep].Name, pd.PrefillInstances, loadOnly)
			}
			return fmt.Errorf("%w: deployment %q: %d prefill instances, none eligible (pd_fallback: fail)",
				ErrNoPrefillInstance, snap.Deployments[dep].Name, pd.PrefillInstances)
		}
	case conditional && pd.LocalCostMs() <= pd.RemoteMs:
		pd.Reason = PDLocalCheaper
	default:
		pd.Reason = PDDisaggregated
		pd.PrefillDraw = rng.Float64()
		pd.Prefill, pd.PrefillProbability = drawPrefill(p, d, pd.PrefillDraw)
	}
	return nil
}

// ttft is r's predicted TTFT in ms: PrefillMs + QueueMs + BatchWaitMs.
func ttft(r *InstanceResult) float64 { return r.PrefillMs + r.QueueMs + r.BatchWaitMs }

// drawPrefill weighs the eligible prefill instances of the drawn deployment
// (d.prefills, in snapshot order, at least one) by CostMs under
// p.Strategy, relative to the least of them (as instanceWeights weighs
// instances), and draws one with u by the rule of normalise. It returns
// its index and P(p|d). The InstanceResults are not written: a prefill
// instance keeps ReasonPrefillRole and probability 0 at the decode level.
func drawPrefill(p *Policy, d *Decision, u float64) (int, float64) {
	minCost := d.Instances[d.prefills[0]].CostMs
	for _, i := range d.prefills[1:] {
		minCost = min(minCost, d.Instances[i].CostMs)
	}
	negInvDelta := -1 / p.DeltaMs
	weight := func(cost float64) float64 {
		diff := cost - minCost
		switch p.Strategy {
		case Softmax:
			if diff > 0 {
				return exp2neg(diff * negInvDelta)
			}
		case Threshold:
			if diff > max(p.ThresholdRatio*minCost, p.ThresholdMinMs) {
				return 0
			}
		case Argmin:
			if diff != 0 {
				return 0
			}
		}
		return 1
	}
	norm := 0.0
	for _, i := range d.prefills {
		norm += weight(d.Instances[i].CostMs)
	}
	picked, last := -1, -1
	var pPicked, pLast, cum float64
	for _, i := range d.prefills {
		w := weight(d.Instances[i].CostMs) / norm
		if w == 0 {
			continue
		}
		last, pLast = int(i), w
		cum += w
		if picked < 0 && u < cum {
			picked, pPicked = int(i), w
		}
	}
	if picked < 0 {
		picked, pPicked = last, pLast
	}
	return picked, pPicked
}

// Defaults of the prefill stage's policy fields.
const (
	// DefaultPDMinUncachedTokens is Policy.PDMinUncachedTokens by default:
	// 512 tokens, between llm-d's sample (16) and Dynamo's bound (2048).
	DefaultPDMinUncachedTokens = 512
	// DefaultPDTransferMsPerToken is Policy.PDTransferMsPerToken by
	// default: 0.005 ms a token.
	DefaultPDTransferMsPerToken = 0.005
	// DefaultPDInterferenceWeight is Policy.PDInterferenceWeight by
	// default: 0.1 ms of TTFT per ms of stall on one running decode, from
	// prefixsim's sweep of 0–1 (BENCHMARKS.md, "prefixsim: prefill
	// deciders"): on pd-mooncake it cuts the stall by 41 % for +1.4 % of
	// mean TTFT; larger weights trade more TTFT for stall.
	DefaultPDInterferenceWeight = 0.1
	// DefaultPDDecodeRunningMs is Policy.PDDecodeRunningMs by default: 5 ms
	// of a decode instance's CostMs per running request, from prefixsim's
	// sweep of 2–20 ms with a batch-dependent decode step (SIMULATION.md
	// section 8): on pd-mixed it keeps the decode slots from filling on the
	// instances the prefixes draw to (TTFT p99 1,040 ms against 23,917 at
	// 0), on pd-mooncake it cuts TPOT p99 by 9 % at the same TTFT p99.
	DefaultPDDecodeRunningMs = 5.0
)

// Disaggregated reports whether the stage chose a prefill instance
// (Reason PDDisaggregated, Prefill its index). A zero PDResult is not.
func (r *PDResult) Disaggregated() bool { return r.Reason == PDDisaggregated && r.Prefill >= 0 }
