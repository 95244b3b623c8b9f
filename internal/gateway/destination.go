package gateway

import (
	"strings"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
)

// Destination is the value of DestinationHeader for a pick:
// "ip:port[,ip:port...]", the chosen instance's address, then up to n
// fallbacks. The fallbacks are the pool's other instances by descending
// joint probability P(d)·P(i|d) in resp's full audit
// (resp.Decision.Instances), ties in audit order; instances with an
// excluded_reason, with a joint probability of 0 (a deployment of weight
// 0 is being drained) or without an address are skipped, and so is an
// address already listed. With an audit that lists no other instance
// (AUDIT_LEVEL_CHOSEN or NONE) there are no fallbacks. The fallbacks of a
// disaggregated pick (resp.Prefill set) are of the chosen deployment only:
// x-prefiller-host-port names a prefill instance of that deployment, and a
// prefill never pairs with a decode of another. Destination does not
// modify resp.
func Destination(resp *pb.PickResponse, n int) string {
	chosen := resp.GetAddress()
	ins := resp.GetDecision().GetInstances()
	if n <= 0 || len(ins) < 2 {
		return chosen
	}
	var sb strings.Builder
	sb.WriteString(chosen)
	sameDep := ""
	if resp.GetPrefill() != nil {
		sameDep = resp.GetDeployment()
	}
	const stackPicks = 8
	var buf [stackPicks]int
	taken := buf[:0]
	for len(taken) < n {
		best := -1
		for i, in := range ins {
			if in.GetExcludedReason() != "" || in.GetJointProbability() <= 0 || in.GetAddress() == "" ||
				in.GetAddress() == chosen || in.GetInstanceId() == resp.GetInstanceId() || listed(ins, taken, in.GetAddress()) ||
				(sameDep != "" && in.GetDeployment() != sameDep) {
				continue
			}
			if best < 0 || in.GetJointProbability() > ins[best].GetJointProbability() {
				best = i
			}
		}
		if best < 0 {
			break
		}
		taken = append(taken, best)
		sb.WriteByte(',')
		sb.WriteString(ins[best].GetAddress())
	}
	return sb.String()
}

// listed reports whether addr is the address of one of ins[taken].
func listed(ins []*pb.InstanceDecision, taken []int, addr string) bool {
	for _, i := range taken {
		if ins[i].GetAddress() == addr {
			return true
		}
	}
	return false
}
