package gateway

import (
	"testing"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
)

func TestDestination(t *testing.T) {
	in := func(id, addr string, p float64, excluded string) *pb.InstanceDecision {
		return &pb.InstanceDecision{InstanceId: id, Address: addr, JointProbability: p, ExcludedReason: excluded}
	}
	resp := &pb.PickResponse{Address: "10.0.0.1:8000", InstanceId: "a", Decision: &pb.Decision{Instances: []*pb.InstanceDecision{
		in("a", "10.0.0.1:8000", 0.4, ""),
		in("b", "10.0.0.2:8000", 0.1, ""),
		in("c", "10.0.0.3:8000", 0.3, ""),
		in("d", "10.0.0.4:8000", 0.9, "kv_full"),
		in("e", "10.0.0.3:8000", 0.2, ""), // same address as c
		in("f", "10.0.0.6:8000", 0, ""),   // weight 0: draining deployment
		in("g", "", 0.5, ""),              // no address
		in("h", "10.0.0.8:8000", 0.1, ""), // ties b; b comes first in the audit
	}}}
	for _, tt := range []struct {
		n    int
		want string
	}{
		{0, "10.0.0.1:8000"},
		{-1, "10.0.0.1:8000"},
		{1, "10.0.0.1:8000,10.0.0.3:8000"},
		{2, "10.0.0.1:8000,10.0.0.3:8000,10.0.0.2:8000"},
		{3, "10.0.0.1:8000,10.0.0.3:8000,10.0.0.2:8000,10.0.0.8:8000"},
		{10, "10.0.0.1:8000,10.0.0.3:8000,10.0.0.2:8000,10.0.0.8:8000"},
	} {
		if got := Destination(resp, tt.n); got != tt.want {
			t.Errorf("Destination(n=%d) = %q, want %q", tt.n, got, tt.want)
		}
	}
	chosenOnly := &pb.PickResponse{Address: "10.0.0.1:8000", InstanceId: "a", Decision: &pb.Decision{Instances: resp.Decision.Instances[:1]}}
	if got := Destination(chosenOnly, 2); got != "10.0.0.1:8000" {
		t.Errorf("Destination(chosen only) = %q", got)
	}
	if got := Destination(&pb.PickResponse{Address: "x:1"}, 2); got != "x:1" {
		t.Errorf("Destination(no decision) = %q", got)
	}
}

// TestDestinationDisaggregated: a disaggregated pick's fallbacks are of its
// deployment only (its prefill instance pairs with no other's decode).
func TestDestinationDisaggregated(t *testing.T) {
	in := func(id, dep, addr string, p float64) *pb.InstanceDecision {
		return &pb.InstanceDecision{InstanceId: id, Deployment: dep, Address: addr, JointProbability: p}
	}
	ins := []*pb.InstanceDecision{in("a1", "a", "10.0.0.1:8000", 0.3), in("b1", "b", "10.0.0.2:8000", 0.6), in("a2", "a", "10.0.0.3:8000", 0.1)}
	resp := &pb.PickResponse{Address: "10.0.0.1:8000", InstanceId: "a1", Deployment: "a", Decision: &pb.Decision{Instances: ins}}
	if got := Destination(resp, 2); got != "10.0.0.1:8000,10.0.0.2:8000,10.0.0.3:8000" {
		t.Fatalf("local pick: %q", got)
	}
	resp.Prefill = &pb.PdPrefill{Address: "10.0.0.9:8000", InstanceId: "a-pre"}
	if got := Destination(resp, 2); got != "10.0.0.1:8000,10.0.0.3:8000" {
		t.Fatalf("disaggregated pick: %q, want deployment a's fallbacks only", got)
	}
	if addr, id, ok := Prefiller(resp); !ok || addr != "10.0.0.9:8000" || id != "a-pre" {
		t.Fatalf("Prefiller = %q, %q, %v", addr, id, ok)
	}
	if _, _, ok := Prefiller(&pb.PickResponse{}); ok {
		t.Fatal("Prefiller of a local pick")
	}
}
