package scheduler_test

import (
	"errors"
	"testing"
	"time"

	"github.com/prefixroute/prefixroute/scheduler"
)

// full returns q(dep, queueMs) with its KV cache at usage kv.
func full(dep int, queueMs, kv float64) scheduler.Instance {
	in := q(dep, queueMs)
	in.KVUsage = kv
	return in
}

func TestSaturation(t *testing.T) {
	stale := q(0, 1)
	stale.ReportAge = time.Hour
	tests := []struct {
		name      string
		set       func(*scheduler.Policy)
		snap      scheduler.Snapshot
		err       error
		instance  int // chosen, when err is nil
		drainMs   float64
		saturated bool
	}{
		{name: "least_loaded picks the cheapest kv_full instance",
			snap:     scheduler.Snapshot{Deployments: deps(1, 1), Instances: []scheduler.Instance{full(0, 30, 0.99), full(1, 10, 0.96), full(0, 20, 1)}},
			instance: 1, drainMs: 10, saturated: true},
		{name: "shed answers ErrSaturated with the earliest drain",
			set:  func(p *scheduler.Policy) { p.OnSaturation = scheduler.SaturationShed },
			snap: scheduler.Snapshot{Deployments: deps(1, 1), Instances: []scheduler.Instance{full(0, 30, 0.99), full(1, 10, 0.96)}},
			err:  scheduler.ErrSaturated, instance: -1, drainMs: 10},
		{name: "queue_full drains down to max_queue_ms",
			set:  func(p *scheduler.Policy) { p.MaxQueueMs = 100; p.OnSaturation = scheduler.SaturationShed },
			snap: scheduler.Snapshot{Deployments: deps(1), Instances: []scheduler.Instance{q(0, 180), q(0, 130), full(0, 90, 0.97)}},
			err:  scheduler.ErrSaturated, instance: -1, drainMs: 30},
		{name: "stale and saturated mixed is saturation",
			snap:     scheduler.Snapshot{Deployments: deps(1), Instances: []scheduler.Instance{stale, full(0, 40, 0.99)}},
			instance: 1, drainMs: 40, saturated: true},
		{name: "a weight 0 deployment is not picked",
			snap:     scheduler.Snapshot{Deployments: deps(0, 1), Instances: []scheduler.Instance{full(0, 1, 0.99), full(1, 50, 0.99)}},
			instance: 1, drainMs: 1, saturated: true},
		{name: "only weight 0 deployments saturated",
			snap: scheduler.Snapshot{Deployments: deps(0), Instances: []scheduler.Instance{full(0, 1, 0.99)}},
			err:  scheduler.ErrSaturated, instance: -1, drainMs: 1},
		{name: "nothing excluded for load is no eligible instance",
			snap: scheduler.Snapshot{Deployments: deps(1), Instances: []scheduler.Instance{stale}},
			err:  scheduler.ErrNoEligibleInstance, instance: -1},
		{name: "one eligible instance: no saturation",
			snap:     scheduler.Snapshot{Deployments: deps(1), Instances: []scheduler.Instance{full(0, 1, 0.99), q(0, 500)}},
			instance: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, chosenOnly := range []bool{false, true} {
				var d scheduler.Decision
				err := scheduler.Decide(policy(tc.set), scheduler.Request{ChosenOnly: chosenOnly}, &tc.snap, draws(0.5, 0.5), &d)
				if !errors.Is(err, tc.err) || (tc.err == nil && err != nil) {
					t.Fatalf("err = %v, want %v", err, tc.err)
				}
				if d.Instance != tc.instance || d.DrainMs != tc.drainMs || d.Saturated != tc.saturated {
					t.Fatalf("instance %d, drain %v ms, saturated %v; want %d, %v ms, %v",
						d.Instance, d.DrainMs, d.Saturated, tc.instance, tc.drainMs, tc.saturated)
				}
				if !tc.saturated {
					continue
				}
				r := d.Instances[d.Instance]
				if r.Reason != scheduler.ReasonNone || r.Probability != 1 || r.Joint != 1 ||
					d.Deployments[d.Deployment].Probability != 1 || d.Deployments[d.Deployment].Reason != scheduler.ReasonNone {
					t.Fatalf("chosen audit %+v, deployment %+v", r, d.Deployments[d.Deployment])
				}
				for i, o := range d.Instances {
					if i != d.Instance && o.Reason == scheduler.ReasonNone {
						t.Fatalf("instance %d has no excluded reason in a saturated decision", i)
					}
				}
				if d.Excluded[scheduler.ReasonKVFull]+d.Excluded[scheduler.ReasonQueueFull]+d.Excluded[scheduler.ReasonStale] != len(tc.snap.Instances)-1 {
					t.Fatalf("Excluded %v: want every instance but the chosen one", d.Excluded)
				}
			}
		})
	}
}

func TestParseSaturation(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want scheduler.Saturation
		ok   bool
	}{{"shed", scheduler.SaturationShed, true}, {" Least_Loaded ", scheduler.SaturationLeastLoaded, true}, {"drop", 0, false}, {"", 0, false}} {
		got, err := scheduler.ParseSaturation(tc.in)
		if (err == nil) != tc.ok || (tc.ok && got != tc.want) {
			t.Errorf("ParseSaturation(%q) = %v, %v", tc.in, got, err)
		}
		if !tc.ok && !errors.Is(err, scheduler.ErrInvalidPolicy) {
			t.Errorf("ParseSaturation(%q): error %v does not wrap ErrInvalidPolicy", tc.in, err)
		}
		if tc.ok && got.String() != map[bool]string{true: "shed", false: "least_loaded"}[tc.want == scheduler.SaturationShed] {
			t.Errorf("String() = %q", got.String())
		}
	}
	p := policy(func(p *scheduler.Policy) { p.OnSaturation = 7 })
	if err := p.Validate(); !errors.Is(err, scheduler.ErrInvalidPolicy) {
		t.Fatalf("Validate with on_saturation 7: %v", err)
	}
}
