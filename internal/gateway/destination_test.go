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
