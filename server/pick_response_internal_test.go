package server

import (
	"fmt"
	"math/rand/v2"
	"testing"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/internal/state"
	"github.com/prefixroute/prefixroute/scheduler"
)

// TestPickResponseAllocs: an audited response costs a fixed number of
// allocations whatever the pool's size (CHOSEN 3: the response block, the
// deployments and their pointers; FULL 2 more), and renders the decision's
// figures.
func TestPickResponseAllocs(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	pk := &state.Pick{Config: state.DefaultConfig()}
	for k := range 16 {
		pk.Snapshot.Deployments = append(pk.Snapshot.Deployments, scheduler.Deployment{Name: fmt.Sprint("d", k), Weight: 1})
	}
	for i := range 1000 {
		pk.Snapshot.Instances = append(pk.Snapshot.Instances, scheduler.Instance{ID: fmt.Sprint("i", i), Deployment: i % 16,
			HasQueueMs: true, QueueMs: float64(i % 50), MatchedBlocks: i % 7})
		pk.Addresses = append(pk.Addresses, fmt.Sprint("10.0.0.", i))
	}
	if err := scheduler.Decide(&pk.Config.Policy, scheduler.Request{PromptTokens: 512, Blocks: 8}, &pk.Snapshot,
		rand.New(rand.NewPCG(1, 2)), &pk.Decision); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		level     pb.AuditLevel
		allocs    float64
		instances int
	}{{pb.AuditLevel_AUDIT_LEVEL_NONE, 1, 0}, {pb.AuditLevel_AUDIT_LEVEL_CHOSEN, 3, 1}, {pb.AuditLevel_AUDIT_LEVEL_FULL, 5, 1000}} {
		var resp *pb.PickResponse
		if n := testing.AllocsPerRun(50, func() { resp = pickResponseAt(tc.level, pk, 7, 8, 512) }); n != tc.allocs {
			t.Errorf("%v: %v allocations, want %v", tc.level, n, tc.allocs)
		}
		dec := resp.GetDecision()
		if len(dec.GetInstances()) != tc.instances || resp.GetInstanceId() != pk.Snapshot.Instances[pk.Decision.Instance].ID {
			t.Fatalf("%v: %d instances, chose %q", tc.level, len(dec.GetInstances()), resp.GetInstanceId())
		}
		if tc.level == pb.AuditLevel_AUDIT_LEVEL_NONE {
			continue
		}
		d := &pk.Decision
		got := dec.GetInstances()[0]
		if tc.level == pb.AuditLevel_AUDIT_LEVEL_FULL {
			got = dec.GetInstances()[d.Instance]
		}
		r := d.Instances[d.Instance]
		if got.GetJointProbability() != r.Joint || got.GetCostMs() != r.CostMs || got.GetAddress() != pk.Addresses[d.Instance] ||
			len(dec.GetDeployments()) != 16 || dec.GetDeployments()[d.Deployment].GetProbability() != d.Deployments[d.Deployment].Probability ||
			dec.GetSeed() != 7 || dec.GetPolicy().GetStaleAfter().AsDuration() != pk.Config.Policy.StaleAfter ||
			dec.GetPolicy().GetForgetAfter().AsDuration() != pk.Config.Policy.ForgetAfter {
			t.Fatalf("%v: response %v does not render the decision", tc.level, dec)
		}
	}
}
