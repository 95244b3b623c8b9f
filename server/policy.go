package server

import (
	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/internal/protoconv"
	"github.com/prefixroute/prefixroute/scheduler"
)

// policyProto renders every field of p (protoconv.PolicyProto).
func policyProto(p *scheduler.Policy) *pb.Policy { return protoconv.PolicyProto(p) }

// mergePolicy returns base with the fields set in m, validated
// (protoconv.MergePolicy). A nil m sets no field.
func mergePolicy(base scheduler.Policy, m *pb.Policy) (scheduler.Policy, error) {
	return protoconv.MergePolicy(base, m)
}
