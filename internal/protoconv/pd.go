package protoconv

import (
	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/internal/state"
	"github.com/prefixroute/prefixroute/scheduler"
)

// pdMessages are the prefill stage's messages of one response, allocated
// together.
type pdMessages struct {
	prefill pb.PdPrefill
	dec     pb.PdDecision
}

// PDProto renders the prefill stage of pk's decision (issue 30): the
// prefill choice of a disaggregated pick (nil otherwise) and, when audit,
// the stage's audit (nil when the stage did not run: the drawn deployment
// has no prefill instance). One allocation when the stage ran, none
// otherwise. Safe for concurrent use with distinct picks.
func PDProto(pk *state.Pick, audit bool) (*pb.PdPrefill, *pb.PdDecision) {
	pd := &pk.Decision.PD
	if pd.Reason == scheduler.PDNone {
		return nil, nil
	}
	m := new(pdMessages)
	var prefill *pb.PdPrefill
	if i := pd.Prefill; pd.Disaggregated() {
		prefill = &m.prefill
		prefill.Address, prefill.InstanceId, prefill.Probability = pk.Addresses[i], pk.Snapshot.Instances[i].ID, pd.PrefillProbability
		m.dec.PrefillInstanceId = prefill.InstanceId
	}
	if !audit {
		return prefill, nil
	}
	d := &m.dec
	d.Reason, d.PrefillProbability, d.PrefillDraw = pd.Reason.String(), pd.PrefillProbability, pd.PrefillDraw
	d.PrefillInstances, d.PrefillEligible = uint32(pd.PrefillInstances), uint32(pd.PrefillEligible)
	d.UncachedTokens, d.LocalMs, d.RemoteMs, d.TransferMs = pd.UncachedTokens, pd.LocalMs, pd.RemoteMs, pd.TransferMs
	d.RunningRequests, d.InterferenceMs = pd.RunningRequests, pd.InterferenceMs
	return prefill, d
}
