package auth

import (
	"context"
	"errors"
	"fmt"
	"math"
)

// MaxFlowIDBytes is the longest flow_id a pick may carry, and a flow
// binding name: 128 bytes.
const MaxFlowIDBytes = 128

// FlowBinding binds a gateway principal's picks to a flow and a maximum
// priority, so that a client cannot promote itself or pose as another
// tenant (flow control, docs/flow-control.md). Immutable once loaded.
type FlowBinding struct {
	// FlowID, when not "", replaces the flow_id of every pick.
	FlowID string
	// MaxPriority caps the priority of every pick when HasMaxPriority.
	MaxPriority    int32
	HasMaxPriority bool
}

// flowEntry is the tokens file's flow key.
type flowEntry struct {
	FlowID      string `yaml:"flow_id"`
	MaxPriority *int64 `yaml:"max_priority"`
}

// binding checks the entry of an identity with roles.
func (e *flowEntry) binding(roles Role) (*FlowBinding, error) {
	if roles&RoleGateway == 0 {
		return nil, errors.New("flow is only for identities with role gateway")
	}
	if e.FlowID == "" && e.MaxPriority == nil {
		return nil, errors.New("flow needs flow_id or max_priority")
	}
	if len(e.FlowID) > MaxFlowIDBytes {
		return nil, fmt.Errorf("flow.flow_id is %d bytes; at most %d", len(e.FlowID), MaxFlowIDBytes)
	}
	b := &FlowBinding{FlowID: e.FlowID}
	if e.MaxPriority != nil {
		if *e.MaxPriority < math.MinInt32 || *e.MaxPriority > math.MaxInt32 {
			return nil, fmt.Errorf("flow.max_priority %d is outside [%d, %d]", *e.MaxPriority, math.MinInt32, math.MaxInt32)
		}
		b.MaxPriority, b.HasMaxPriority = int32(*e.MaxPriority), true
	}
	return b, nil
}

// Apply returns the priority and flow id a pick asking for priority and
// flow may have: the priority capped at MaxPriority, the flow replaced by
// FlowID. A nil binding changes nothing.
func (b *FlowBinding) Apply(priority int32, flow string) (int32, string) {
	if b == nil {
		return priority, flow
	}
	if b.HasMaxPriority && priority > b.MaxPriority {
		priority = b.MaxPriority
	}
	if b.FlowID != "" {
		flow = b.FlowID
	}
	return priority, flow
}

// BindFlow applies the flow binding of ctx's authenticated caller, if any
// (FlowBinding.Apply); without a caller or a binding, priority and flow
// stand. Safe for concurrent use.
func BindFlow(ctx context.Context, priority int32, flow string) (int32, string) {
	c := CallerFrom(ctx)
	if c == nil || c.Principal == nil {
		return priority, flow
	}
	return c.Flow.Apply(priority, flow)
}
