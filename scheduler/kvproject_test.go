package scheduler_test

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/prefixroute/prefixroute/scheduler"
)

func TestKVBlocks(t *testing.T) {
	tests := []struct {
		uncached, blockSize uint32
		want                uint64
	}{
		{0, 16, 0}, {1, 16, 1}, {16, 16, 1}, {17, 16, 2}, {1000, 32, 32}, {1024, 32, 32},
		{math.MaxUint32, 1, math.MaxUint32}, {math.MaxUint32, math.MaxUint32, 1}, {100, 0, 0},
	}
	for _, tc := range tests {
		if got := scheduler.KVBlocks(tc.uncached, tc.blockSize); got != tc.want {
			t.Errorf("KVBlocks(%d, %d) = %d, want %d", tc.uncached, tc.blockSize, got, tc.want)
		}
	}
}

func TestAssignedKVUsage(t *testing.T) {
	tests := []struct {
		blocks, capacity uint64
		want             float64
	}{
		{0, 1000, 0}, {250, 1000, 0.25}, {1000, 1000, 1}, {3000, 1000, 3}, {500, 0, 0}, {1, 1 << 30, 1.0 / (1 << 30)},
	}
	for _, tc := range tests {
		if got := scheduler.AssignedKVUsage(tc.blocks, tc.capacity); got != tc.want {
			t.Errorf("AssignedKVUsage(%d, %d) = %v, want %v", tc.blocks, tc.capacity, got, tc.want)
		}
	}
}

// kvAt returns q(dep, queueMs) at KV usage kv with assigned usage extra.
func kvAt(dep int, queueMs, kv, extra float64) scheduler.Instance {
	in := full(dep, queueMs, kv)
	in.AssignedKVUsage = extra
	return in
}

// TestProjectedKVFull: the kv_full check reads the reported usage plus the
// usage assigned since the report (max_kv_usage 0.95 by default), in Decide
// and in Standing alike; the pool saturates on projected usage alone.
func TestProjectedKVFull(t *testing.T) {
	tests := []struct {
		name   string
		in     scheduler.Instance
		reason scheduler.Reason
	}{
		{"reported only, under", kvAt(0, 1, 0.94, 0), scheduler.ReasonNone},
		{"reported only, at", kvAt(0, 1, 0.95, 0), scheduler.ReasonKVFull},
		{"projected under", kvAt(0, 1, 0.80, 0.125), scheduler.ReasonNone},
		{"projected at", kvAt(0, 1, 0.75, 0.25), scheduler.ReasonKVFull},
		{"projected over", kvAt(0, 1, 0.5, 0.5), scheduler.ReasonKVFull},
		{"assigned alone over", kvAt(0, 1, 0, 1.5), scheduler.ReasonKVFull},
	}
	p := policy(nil)
	for _, tc := range tests {
		snap := scheduler.Snapshot{Deployments: deps(1), Instances: []scheduler.Instance{tc.in, kvAt(0, 5, 0.5, 0)}}
		var d scheduler.Decision
		if err := scheduler.Decide(p, scheduler.Request{}, &snap, draws(0, 0), &d); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := d.Instances[0].Reason; got != tc.reason {
			t.Errorf("%s: Decide reason %v, want %v", tc.name, got, tc.reason)
		}
		if got, _, ok := scheduler.Standing(p, &tc.in); !ok || got != tc.reason {
			t.Errorf("%s: Standing reason %v (ok %v), want %v", tc.name, got, ok, tc.reason)
		}
	}
	// Every instance full by projection: saturated, drain = least queue.
	snap := scheduler.Snapshot{Deployments: deps(1), Instances: []scheduler.Instance{kvAt(0, 30, 0.7, 0.3), kvAt(0, 20, 0.9, 0.05)}}
	var d scheduler.Decision
	err := scheduler.Decide(policy(func(p *scheduler.Policy) { p.OnSaturation = scheduler.SaturationQueue }), scheduler.Request{}, &snap, draws(0, 0), &d)
	if !errors.Is(err, scheduler.ErrSaturated) || d.DrainMs != 20 || d.Excluded[scheduler.ReasonKVFull] != 2 {
		t.Errorf("projected full pool: err %v, drain %v ms, kv_full %d; want ErrSaturated, 20 ms, 2", err, d.DrainMs, d.Excluded[scheduler.ReasonKVFull])
	}
}

func TestAssignedKVUsageInvalid(t *testing.T) {
	for _, v := range []float64{-0.5, math.NaN(), math.Inf(1)} {
		snap := scheduler.Snapshot{Deployments: deps(1), Instances: []scheduler.Instance{kvAt(0, 1, 0, v)}}
		var d scheduler.Decision
		err := scheduler.Decide(policy(nil), scheduler.Request{}, &snap, draws(0, 0), &d)
		if !errors.Is(err, scheduler.ErrInvalidSnapshot) || !strings.Contains(err.Error(), "AssignedKVUsage is") {
			t.Errorf("AssignedKVUsage %v: %v, want ErrInvalidSnapshot naming AssignedKVUsage", v, err)
		}
		if _, _, ok := scheduler.Standing(policy(nil), &snap.Instances[0]); ok {
			t.Errorf("AssignedKVUsage %v: Standing ok", v)
		}
	}
}
