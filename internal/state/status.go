package state

import "time"

// InstanceState is an instance's availability as the router sees it.
type InstanceState uint8

// The states, as ListInstances shows them.
const (
	StateOK InstanceState = iota + 1
	StateStale
	StateDraining
	StateDisconnected
	// StateUnreachable: connected, but out of picks after a gateway's
	// failed connect (ApplyOutcomes, OutcomeConnectFailed).
	StateUnreachable
)

// String returns ok, stale, draining, disconnected or unreachable.
func (s InstanceState) String() string {
	switch s {
	case StateOK:
		return "ok"
	case StateStale:
		return "stale"
	case StateDraining:
		return "draining"
	case StateDisconnected:
		return "disconnected"
	case StateUnreachable:
		return "unreachable"
	}
	return "unknown"
}

// InstanceStatus is one instance as ListInstances shows it.
type InstanceStatus struct {
	Identity
	State     InstanceState
	ReportAge time.Duration
	// Last is the latest report, without its cache events.
	Last Report
	// CachedBlocks is the number of blocks the index holds for the instance.
	CachedBlocks int
	// AssignedTokens is the prefill work picked onto it since its last report.
	AssignedTokens uint64
	// AssignedKVBlocks is the KV blocks of the uncached tokens picked onto
	// it since its last report (added to its KV usage in the kv_full check
	// when it reports kv_capacity_blocks).
	AssignedKVBlocks uint64
	// BackoffLeft, for a StateUnreachable instance, is how long until a
	// load report may end the exclusion (UnreachableBackoff after the
	// failed connect); 0 when its next report will.
	BackoffLeft time.Duration
}

// Instances returns the pool's instances in snapshot order: by deployment,
// then instance id.
func (p *Pool) Instances(now time.Time) []InstanceStatus {
	stale := p.cfg.Load().Policy.StaleAfter
	p.mu.RLock()
	defer p.mu.RUnlock()
	out := make([]InstanceStatus, len(p.order))
	for i, in := range p.order {
		st, age := in.state(now, stale)
		out[i] = InstanceStatus{Identity: in.id, State: st, ReportAge: age, Last: in.last,
			CachedBlocks: in.cache.Len(), AssignedTokens: in.assigned, AssignedKVBlocks: in.assignedKV}
		if st == StateUnreachable {
			out[i].BackoffLeft = max(0, UnreachableBackoff-now.Sub(in.unreachableAt))
		}
	}
	return out
}

// state is in's availability at now with the pool's stale_after, and the
// age of its last report (a huge age before the first report: stale). A
// connected instance excluded as unreachable is StateUnreachable, whatever
// its report says.
// Called with the pool's lock held.
func (in *instance) state(now time.Time, stale time.Duration) (InstanceState, time.Duration) {
	age := max(0, now.Sub(in.lastReport))
	switch {
	case !in.connected:
		return StateDisconnected, age
	case in.unreachable:
		return StateUnreachable, age
	case age > stale:
		return StateStale, age
	case in.last.Draining:
		return StateDraining, age
	}
	return StateOK, age
}
