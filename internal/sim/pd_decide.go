package sim

import (
	"github.com/prefixroute/prefixroute/scheduler"
)

// The deciders' constants, from the anchors' sources
// (../shared/research/pd-and-flow-control.md).
const (
	// llmdNonCachedTokens is nonCachedTokens of llm-d's sample config
	// (deploy/config/pd-epp-config.yaml, prefix-based-pd-decider).
	llmdNonCachedTokens = 16
	// dynamoMaxLocalISL and dynamoMaxLocalRatio are Dynamo's isl_bounding
	// bounds (lib/kv-router/src/conditional_disagg.rs): bypass the prefill
	// worker iff eff_isl < 2048 and eff_isl/prompt < 0.7.
	dynamoMaxLocalISL   = 2048
	dynamoMaxLocalRatio = 0.7
)

// pdPrefill applies decider to the router's last pick (sr.out) and
// returns the engine index of the instance that prefills remotely and its
// index in the pick's snapshot, or -1, -1 for a local prefill on the
// decode instance. Every decider keeps the
// router's decode instance; a drawn deployment without prefill instances
// is always local.
//
//   - router: the router's decision as is.
//   - always: every request is disaggregated (SGLang's gateway, FlexLB).
//   - llmd: disaggregated iff the tokens uncached on the decode instance
//     (the router's estimate, as llm-d reads its decode endpoint's prefix
//     match) are ≥ 16.
//   - dynamo: local iff eff_isl = those uncached tokens is < 2048 and
//     < 0.7 of the prompt; else disaggregated.
//   - local: never disaggregated.
//
// When a baseline disaggregates a request the router kept local, the
// prefill instance is the drawn deployment's prefill instance with the
// least predicted TTFT (prefix hits and queue: PrefillMs + QueueMs +
// BatchWaitMs), the choice llm-d and FlexLB make; when the router
// disaggregated too, its own draw. dispatchPD then charges the work to the
// instance that does it (Pool.Assign), as a router that made that choice
// would; the router's own charge stays until the instance's next report.
func pdPrefill(decider string, sr *stateRouter, prompt uint32) (int, int) {
	d := &sr.out.Decision
	pd := &d.PD
	if pd.Reason == scheduler.PDNone {
		return -1, -1
	}
	u := d.Instances[d.Instance].UncachedTokens
	var remote bool
	switch decider {
	case "router":
		remote = pd.Disaggregated()
	case "always":
		remote = true
	case "llmd":
		remote = u >= llmdNonCachedTokens
	case "dynamo":
		remote = !(u < dynamoMaxLocalISL && float64(u) < dynamoMaxLocalRatio*float64(prompt))
	}
	if !remote {
		return -1, -1
	}
	snap := &sr.out.Snapshot
	if pd.Disaggregated() {
		return sr.index[snap.Instances[pd.Prefill].ID], pd.Prefill
	}
	best := -1
	for i := range snap.Instances {
		in := &snap.Instances[i]
		if in.Deployment != d.Deployment || in.Role != scheduler.RolePrefill {
			continue
		}
		if best < 0 || predictedTTFT(&d.Instances[i]) < predictedTTFT(&d.Instances[best]) {
			best = i
		}
	}
	if best < 0 {
		return -1, -1
	}
	return sr.index[snap.Instances[best].ID], best
}

// predictedTTFT is r's PrefillMs + QueueMs + BatchWaitMs, in ms.
func predictedTTFT(r *scheduler.InstanceResult) float64 {
	return r.PrefillMs + r.QueueMs + r.BatchWaitMs
}
