package gateway

import pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"

// Headers of a disaggregated pick (issue 30, docs/disaggregation.md).
const (
	// PrefillerHeader carries the prefill instance's "ip:port" when the
	// pick is disaggregated: the header llm-d's routing sidecar on decode
	// pods reads (routing.PrefillEndpointHeader) to send the prefill leg
	// there before decoding locally. The front ends never pass on a
	// client's own value: it is removed, or replaced by the pick's.
	PrefillerHeader = "x-prefiller-host-port"
	// PrefillInstanceHeader carries the prefill instance's id, for
	// gateways that address prefill workers by id (Dynamo's
	// x-dynamo-prefill-instance-id, when instance ids are worker ids).
	PrefillInstanceHeader = "x-prefixroute-prefill-instance"
)

// Prefiller returns the prefill instance's address and id of a
// disaggregated pick, and false when resp prefills on its instance.
func Prefiller(resp *pb.PickResponse) (addr, id string, ok bool) {
	p := resp.GetPrefill()
	if p == nil || p.GetAddress() == "" {
		return "", "", false
	}
	return p.GetAddress(), p.GetInstanceId(), true
}
