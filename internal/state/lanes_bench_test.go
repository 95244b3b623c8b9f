package state

import (
	"fmt"
	"testing"
)

// BenchmarkPickShortLanes compares Pool.Pick with a short lane of one
// instance per deployment (Policy.ShortLanes 1) against the same pool
// without (issue 29: the lane is one pass more over the instances, never
// a second decision): 1,000 instances in 16 deployments, exact mode, the
// Pick benchmark's requests, for the chosen deployment's audit and the
// full one. short_lane_max_prefill_ms is 50 ms, so the lane refuses most
// picks' prefills there and takes the cached ones.
func BenchmarkPickShortLanes(b *testing.B) {
	const n, deps = 1000, 16
	for _, audit := range []string{"chosen", "full"} {
		for _, lanes := range []uint32{0, 1} {
			b.Run(fmt.Sprintf("audit=%s/short_lanes=%d", audit, lanes), func(b *testing.B) {
				bp := newBenchPool(b, n, deps, true)
				cfg := *bp.p.Config()
				cfg.Policy.ShortLanes, cfg.Policy.ShortLaneMaxPrefillMs = lanes, 50
				bp.p.SetConfig(&cfg)
				benchPickOn(b, bp, n, audit == "chosen")
			})
		}
	}
}
