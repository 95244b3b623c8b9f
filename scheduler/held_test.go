package scheduler_test

import (
	"errors"
	"math"
	"testing"

	"github.com/prefixroute/prefixroute/scheduler"
)

// TestHeldDeployment: under on_saturation: queue a deployment whose live
// instances are all full keeps its share of the deployment draw (it is
// Held) instead of spilling onto the others; drawn, Decide returns
// ErrDeploymentSaturated with the deployment and its drain time. Under the
// other choices it takes no part, as before.
func TestHeldDeployment(t *testing.T) {
	queue := func(p *scheduler.Policy) { p.OnSaturation = scheduler.SaturationQueue; p.MaxQueueMs = 100 }
	shed := func(p *scheduler.Policy) { p.OnSaturation = scheduler.SaturationShed; p.MaxQueueMs = 100 }
	withLoad := func(p *scheduler.Policy) { queue(p); p.DeploymentDeltaMs = 50 }
	hitFull := full(1, 30, 0.99)
	hitFull.MatchedBlocks = 4
	tests := []struct {
		name  string
		set   func(*scheduler.Policy)
		snap  scheduler.Snapshot
		draw  float64
		err   error
		pHeld float64 // P(d) of deployment 1
		held  bool    // deployment 1 Held
		drain float64 // DrainMs on ErrDeploymentSaturated
	}{
		{name: "queue: a full canary keeps its 10 % and the draw below it goes to stable",
			set: queue, snap: scheduler.Snapshot{Deployments: deps(9, 1), Instances: []scheduler.Instance{q(0, 5), full(1, 40, 0.99), q(1, 130)}},
			draw: 0.89, pHeld: 0.1, held: true},
		{name: "queue: drawn, the full canary holds the pick with its earliest drain",
			set: queue, snap: scheduler.Snapshot{Deployments: deps(9, 1), Instances: []scheduler.Instance{q(0, 5), full(1, 40, 0.99), q(1, 130)}},
			draw: 0.9, err: scheduler.ErrDeploymentSaturated, pHeld: 0.1, held: true, drain: 30},
		{name: "queue: the full instances' prefix counts in the draw",
			set: queue, snap: scheduler.Snapshot{Deployments: deps(9, 1), Instances: []scheduler.Instance{q(0, 5), hitFull}},
			draw: 0.99, err: scheduler.ErrDeploymentSaturated, pHeld: 1024.0 / 1033, held: true, drain: 30},
		{name: "queue: the load term reads the full instances' queues",
			set: withLoad, snap: scheduler.Snapshot{Deployments: deps(1, 1), Instances: []scheduler.Instance{q(0, 0), q(1, 150)}},
			draw: 0.1, pHeld: 1.0 / 9, held: true}, // L = 150 ms against 0: 2^-3
		{name: "queue: only weight 0 deployments have room: every pick waits for the full one",
			set: queue, snap: scheduler.Snapshot{Deployments: deps(0, 1), Instances: []scheduler.Instance{q(0, 5), q(1, 150)}},
			draw: 0, err: scheduler.ErrDeploymentSaturated, pHeld: 1, held: true, drain: 50},
		{name: "queue: a weight 0 full deployment is not held",
			set: queue, snap: scheduler.Snapshot{Deployments: deps(1, 0), Instances: []scheduler.Instance{q(0, 5), q(1, 150)}},
			draw: 0.99},
		{name: "queue: a deployment down, not full, is not held",
			set: queue, snap: scheduler.Snapshot{Deployments: deps(9, 1), Instances: []scheduler.Instance{q(0, 5), {ID: "gone", Deployment: 1, Disconnected: true}}},
			draw: 0.99},
		{name: "shed: the full canary spills to stable as before",
			set: shed, snap: scheduler.Snapshot{Deployments: deps(9, 1), Instances: []scheduler.Instance{q(0, 5), full(1, 40, 0.99)}},
			draw: 0.99},
		{name: "least_loaded: the same",
			snap: scheduler.Snapshot{Deployments: deps(9, 1), Instances: []scheduler.Instance{q(0, 5), full(1, 40, 0.99)}},
			draw: 0.99},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, chosenOnly := range []bool{false, true} {
				var d scheduler.Decision
				err := scheduler.Decide(policy(tc.set), scheduler.Request{Blocks: 4, ChosenOnly: chosenOnly}, &tc.snap, draws(tc.draw, 0), &d)
				if !errors.Is(err, tc.err) || (tc.err == nil && err != nil) {
					t.Fatalf("chosenOnly %v: err = %v, want %v", chosenOnly, err, tc.err)
				}
				if tc.err != nil && !errors.Is(err, scheduler.ErrSaturated) {
					t.Fatalf("%v does not match ErrSaturated", err)
				}
				dr := d.Deployments[1]
				if dr.Held != tc.held || math.Abs(dr.Probability-tc.pHeld) > 1e-12 {
					t.Fatalf("chosenOnly %v: deployment 1 held %v P %v, want %v %v (%+v)", chosenOnly, dr.Held, dr.Probability, tc.held, tc.pHeld, dr)
				}
				if tc.err != nil {
					if d.HeldDeployment != 1 || d.Deployment != -1 || d.Instance != -1 || d.DrainMs != tc.drain || d.DeploymentDraw != tc.draw {
						t.Fatalf("held %d, chosen (%d, %d), drain %v ms, draw %v; want held 1, (-1, -1), %v ms, %v",
							d.HeldDeployment, d.Deployment, d.Instance, d.DrainMs, d.DeploymentDraw, tc.drain, tc.draw)
					}
					continue
				}
				if d.HeldDeployment != -1 || d.Deployment != 0 {
					t.Fatalf("chosenOnly %v: held %d, deployment %d; want -1, 0", chosenOnly, d.HeldDeployment, d.Deployment)
				}
				checkInvariants(t, &tc.snap, &d, err, 1e-9)
			}
		})
	}
}
