package scheduler

import "strconv"

// Reason says why an instance or a deployment got probability 0. The zero
// value ReasonNone means "took part": an instance with ReasonNone passed every
// check and has P(i|d) > 0 (unless it rounds to 0 because its cost is
// hundreds of DeltaMs above the best), a deployment with ReasonNone has
// P(d) > 0 (same caveat). A Reason is a plain value, safe for concurrent use.
//
// Instances of a deployment that was not drawn keep ReasonNone: they took part
// in the model, their P(i|d) and Joint are in the audit, and
// Decision.Deployment says which deployment was drawn.
type Reason uint8

// The reasons. The instance eligibility checks run in this order and the
// first one that fails is recorded; the strategy reasons come next, then the
// deployment reasons. Map them by name (Reason.String), not by number: the
// numbers may change when reasons are added.
const (
	ReasonNone               Reason = iota // took part (eligible)
	ReasonPrefillRole                      // instance: role prefill, never a decode (primary) choice; see Decision.PD
	ReasonDisconnected                     // instance: report stream closed
	ReasonStale                            // instance: ReportAge > Policy.StaleAfter
	ReasonUnreachable                      // instance: a gateway could not connect to it (PickService.ReportOutcome)
	ReasonDraining                         // instance: reported draining
	ReasonExcluded                         // instance: excluded by the request (retry)
	ReasonKVFull                           // instance: KVUsage + AssignedKVUsage >= Policy.MaxKVUsage
	ReasonQueueFull                        // instance: queue_ms > Policy.MaxQueueMs (when set)
	ReasonThreshold                        // instance, threshold strategy: cost outside the band
	ReasonNotMinimum                       // instance, argmin strategy: cost above the minimum
	ReasonSLOMiss                          // instance: predicted to miss the request's TTFT target while another of its deployment meets it
	ReasonShortLane                        // instance: in its deployment's short lane, and the request's prefill there is over Policy.ShortLaneMaxPrefillMs
	ReasonZeroWeight                       // deployment: weight 0
	ReasonUnweighted                       // deployment: missing from the configured weights
	ReasonNoEligibleInstance               // deployment: no eligible instance
	NumReasons                             // the number of reasons; not a reason
)

var reasonNames = [NumReasons]string{
	ReasonNone:               "",
	ReasonPrefillRole:        "prefill_role",
	ReasonDisconnected:       "disconnected",
	ReasonStale:              "stale",
	ReasonUnreachable:        "unreachable",
	ReasonDraining:           "draining",
	ReasonExcluded:           "excluded_by_request",
	ReasonKVFull:             "kv_full",
	ReasonQueueFull:          "queue_full",
	ReasonThreshold:          "outside_threshold",
	ReasonNotMinimum:         "not_minimum",
	ReasonSLOMiss:            "slo_miss",
	ReasonShortLane:          "short_lane",
	ReasonZeroWeight:         "zero_weight",
	ReasonUnweighted:         "not_in_weights",
	ReasonNoEligibleInstance: "no_eligible_instance",
}

// String returns the reason as a short snake_case word ("stale", "kv_full",
// "not_in_weights", ...), "" for ReasonNone and "Reason(N)" for an unknown
// value.
func (r Reason) String() string {
	if r < NumReasons {
		return reasonNames[r]
	}
	return "Reason(" + strconv.Itoa(int(r)) + ")"
}

// ParseReason is the inverse of Reason.String for the known reasons ("" gives
// ReasonNone). The boolean is false for an unknown word.
func ParseReason(s string) (Reason, bool) {
	for r, name := range reasonNames {
		if name == s {
			return Reason(r), true
		}
	}
	return ReasonNone, false
}

// IsEligibility reports whether r is one of the instance eligibility reasons
// (ReasonPrefillRole through ReasonQueueFull), the ones checked before any
// cost comparison.
func (r Reason) IsEligibility() bool {
	return r >= ReasonPrefillRole && r <= ReasonQueueFull
}

// IsInstance reports whether r can be an instance's reason (eligibility or
// strategy); the others, but ReasonNone, are deployment reasons.
func (r Reason) IsInstance() bool {
	return r >= ReasonPrefillRole && r <= ReasonShortLane
}
