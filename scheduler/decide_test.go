package scheduler_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prefixroute/prefixroute/scheduler"
)

func TestDecideErrors(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	good := func() *scheduler.Snapshot {
		return &scheduler.Snapshot{Deployments: deps(1, 1), Instances: []scheduler.Instance{q(0, 1), q(1, 2)}}
	}
	withInst := func(f func(*scheduler.Instance)) *scheduler.Snapshot {
		s := good()
		s.Instances[1].ID = "bad-1"
		f(&s.Instances[1])
		return s
	}
	tests := []struct {
		name    string
		p       *scheduler.Policy
		req     scheduler.Request
		snap    *scheduler.Snapshot
		nilRNG  bool
		nilD    bool
		want    error
		message string // a part of the error text
	}{
		{name: "nil decision", snap: good(), nilD: true, want: scheduler.ErrInvalidArgument, message: "Decision"},
		{name: "nil rng", snap: good(), nilRNG: true, want: scheduler.ErrInvalidArgument, message: "RNG"},
		{name: "nil policy", p: nil, snap: good(), want: scheduler.ErrInvalidPolicy, message: "nil"},
		{name: "invalid policy", p: policy(func(p *scheduler.Policy) { p.DeltaMs = -1 }), snap: good(), want: scheduler.ErrInvalidPolicy, message: "delta_ms must be in [0.001, 1000000] ms, got -1"},
		{name: "nil snapshot", snap: nil, want: scheduler.ErrNoInstances},
		{name: "no instances", snap: &scheduler.Snapshot{Deployments: deps(1)}, want: scheduler.ErrNoInstances},
		{name: "no deployments, no instances", snap: &scheduler.Snapshot{}, want: scheduler.ErrNoInstances},
		{name: "negative Blocks", req: scheduler.Request{Blocks: -1}, snap: good(), want: scheduler.ErrInvalidSnapshot, message: "Blocks"},
		{name: "NaN weight", snap: &scheduler.Snapshot{Deployments: []scheduler.Deployment{{Name: "canary", Weight: nan}}, Instances: []scheduler.Instance{q(0, 1)}}, want: scheduler.ErrInvalidSnapshot, message: `deployment "canary" (index 0): Weight is NaN`},
		{name: "negative weight", snap: &scheduler.Snapshot{Deployments: []scheduler.Deployment{{Name: "x", Weight: -1}}, Instances: []scheduler.Instance{q(0, 1)}}, want: scheduler.ErrInvalidSnapshot, message: "Weight is -1"},
		{name: "infinite weight", snap: &scheduler.Snapshot{Deployments: []scheduler.Deployment{{Name: "x", Weight: inf}}, Instances: []scheduler.Instance{q(0, 1)}}, want: scheduler.ErrInvalidSnapshot, message: "Weight is +Inf"},
		{name: "deployment index too large", snap: withInst(func(in *scheduler.Instance) { in.Deployment = 2 }), want: scheduler.ErrInvalidSnapshot, message: `instance "bad-1" (index 1): Deployment index 2 out of range [0, 2)`},
		{name: "deployment index negative", snap: withInst(func(in *scheduler.Instance) { in.Deployment = -1 }), want: scheduler.ErrInvalidSnapshot, message: "Deployment index -1"},
		{name: "negative MatchedBlocks", snap: withInst(func(in *scheduler.Instance) { in.MatchedBlocks = -3 }), want: scheduler.ErrInvalidSnapshot, message: `"bad-1" (index 1): MatchedBlocks is -3`},
		{name: "NaN throughput", snap: withInst(func(in *scheduler.Instance) { in.PrefillTokensPerSecond = nan }), want: scheduler.ErrInvalidSnapshot, message: "PrefillTokensPerSecond is NaN"},
		{name: "negative throughput", snap: withInst(func(in *scheduler.Instance) { in.PrefillTokensPerSecond = -1 }), want: scheduler.ErrInvalidSnapshot, message: "PrefillTokensPerSecond is -1"},
		{name: "NaN queue", snap: withInst(func(in *scheduler.Instance) { in.QueueMs = nan }), want: scheduler.ErrInvalidSnapshot, message: "QueueMs is NaN"},
		{name: "infinite queue", snap: withInst(func(in *scheduler.Instance) { in.QueueMs = inf }), want: scheduler.ErrInvalidSnapshot, message: "QueueMs is +Inf"},
		{name: "negative KV usage", snap: withInst(func(in *scheduler.Instance) { in.KVUsage = -0.1 }), want: scheduler.ErrInvalidSnapshot, message: "KVUsage is -0.1"},
		{name: "NaN KV usage", snap: withInst(func(in *scheduler.Instance) { in.KVUsage = nan }), want: scheduler.ErrInvalidSnapshot, message: "KVUsage is NaN"},
		{name: "negative report age", snap: withInst(func(in *scheduler.Instance) { in.ReportAge = -time.Millisecond }), want: scheduler.ErrInvalidSnapshot, message: "ReportAge is -1ms"},
		{name: "bad figures on an excluded instance still count", snap: withInst(func(in *scheduler.Instance) { in.Disconnected, in.QueueMs = true, nan }), want: scheduler.ErrInvalidSnapshot, message: "QueueMs"},
		{name: "cost overflow", req: scheduler.Request{PromptTokens: 1000}, snap: withInst(func(in *scheduler.Instance) { in.PrefillTokensPerSecond = 1e-310 }), want: scheduler.ErrInvalidSnapshot, message: "cost is not finite"},
		{name: "sum overflow", req: scheduler.Request{PromptTokens: 1000}, snap: withInst(func(in *scheduler.Instance) { in.QueueMs, in.PrefillTokensPerSecond = math.MaxFloat64, 1e-300 }), want: scheduler.ErrInvalidSnapshot, message: "cost is not finite"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := tt.p
			if p == nil && tt.name != "nil policy" {
				p = policy(nil)
			}
			rng := draws(0.5, 0.5)
			var r scheduler.RNG = rng
			if tt.nilRNG {
				r = nil
			}
			d := &scheduler.Decision{Deployment: 5, Instance: 5}
			if tt.nilD {
				d = nil
			}
			err := scheduler.Decide(p, tt.req, tt.snap, r, d)
			if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
			if !strings.Contains(err.Error(), tt.message) {
				t.Fatalf("err = %q, want it to contain %q", err, tt.message)
			}
			if rng.calls != 0 {
				t.Fatalf("RNG called %d times on error", rng.calls)
			}
			if d != nil && (d.Deployment != -1 || d.Instance != -1) {
				t.Fatalf("choice %d/%d on error", d.Deployment, d.Instance)
			}
			if d != nil && tt.snap != nil && errors.Is(err, scheduler.ErrNoInstances) {
				for k, dr := range d.Deployments {
					if dr.Reason != scheduler.ReasonNoEligibleInstance {
						t.Fatalf("deployment %d reason %q", k, dr.Reason)
					}
				}
			}
		})
	}
}

func TestDecideDraws(t *testing.T) {
	// P(d) = 0, 0.5, 0.5 (the first has weight 0); in B, P(i|d) = 0.8, 0.2, 0
	// (the third excluded); in C a single instance.
	excluded := q(1, 0)
	excluded.Excluded = true
	snap := &scheduler.Snapshot{
		Deployments: deps(0, 1, 1),
		Instances:   []scheduler.Instance{q(0, 0), q(1, 100), q(1, 140), excluded, q(2, 10)},
	}
	tests := []struct {
		name     string
		u1, u2   float64
		dep, ins int
	}{
		{"u1 = 0 skips the zero-probability deployment", 0, 0, 1, 1},
		{"below the first cumulative sum", 0.49, 0.79, 1, 1},
		{"the instance cumulative sum is strict", 0.49, 0.8, 1, 2},
		{"the deployment cumulative sum is strict", 0.5, 0.99, 2, 4},
		{"just under 1", 0.9999999999999999, 0.9999999999999999, 2, 4},
		{"u = 1 falls through to the last positive entry", 0.3, 1, 1, 2},
		{"u > 1 falls through to the last positive entry", 1.5, 1.5, 2, 4},
		{"NaN falls through to the last positive entry", math.NaN(), math.NaN(), 2, 4},
		{"negative u takes the first positive entry", -0.5, -0.5, 1, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var d scheduler.Decision
			rng := draws(tt.u1, tt.u2)
			if err := scheduler.Decide(policy(nil), scheduler.Request{}, snap, rng, &d); err != nil {
				t.Fatal(err)
			}
			checkInvariants(t, snap, &d, nil, 1e-12)
			if d.Deployment != tt.dep || d.Instance != tt.ins {
				t.Fatalf("chose %d/%d, want %d/%d", d.Deployment, d.Instance, tt.dep, tt.ins)
			}
			if rng.calls != 2 {
				t.Fatalf("RNG called %d times, want 2", rng.calls)
			}
			if !(d.DeploymentDraw == tt.u1 || math.IsNaN(tt.u1)) || !(d.InstanceDraw == tt.u2 || math.IsNaN(tt.u2)) {
				t.Fatalf("draws recorded %v, %v", d.DeploymentDraw, d.InstanceDraw)
			}
		})
	}
}

func TestDecideDoesNotAllocate(t *testing.T) {
	for _, s := range []scheduler.Strategy{scheduler.Softmax, scheduler.Threshold, scheduler.Argmin} {
		p := policy(func(p *scheduler.Policy) { p.Strategy, p.DeploymentDeltaMs = s, 30 })
		snap := benchSnapshot(64, 4, 1)
		rng := rand.New(rand.NewPCG(1, 2))
		var d scheduler.Decision
		for _, target := range []float64{0, 150} { // none, and one some instances miss (issue 29)
			req := scheduler.Request{PromptTokens: 2048, Blocks: 128, TTFTTargetMs: target}
			if n := testing.AllocsPerRun(200, func() {
				if err := scheduler.Decide(p, req, snap, rng, &d); err != nil {
					t.Fatal(err)
				}
			}); n != 0 {
				t.Errorf("%v, target %v ms: Decide allocates %v times per call with a reused Decision", s, target, n)
			}
		}
	}
}

func TestDecideReuse(t *testing.T) {
	p := policy(func(p *scheduler.Policy) { p.DeploymentDeltaMs = 20 })
	big := benchSnapshot(100, 5, 3)
	small := &scheduler.Snapshot{Deployments: deps(1), Instances: costs(100, 120)}
	var reused scheduler.Decision
	rng := rand.New(rand.NewPCG(3, 4))
	if err := scheduler.Decide(p, scheduler.Request{Blocks: 128}, big, rng, &reused); err != nil {
		t.Fatal(err)
	}
	// Every error path leaves a clean audit behind, whatever came before.
	bad := policy(func(p *scheduler.Policy) { p.DeltaMs = 0 })
	if err := scheduler.Decide(bad, scheduler.Request{Blocks: 128}, big, rng, &reused); err == nil {
		t.Fatal("invalid policy accepted")
	}
	for i, r := range reused.Instances {
		if r != (scheduler.InstanceResult{}) {
			t.Fatalf("instance %d keeps %+v after an error", i, r)
		}
	}
	_ = scheduler.Decide(p, scheduler.Request{}, &scheduler.Snapshot{Deployments: deps(1), Instances: []scheduler.Instance{{Draining: true}}}, rng, &reused)
	if err := scheduler.Decide(p, scheduler.Request{}, small, draws(0.1, 0.1), &reused); err != nil {
		t.Fatal(err)
	}
	var fresh scheduler.Decision
	if err := scheduler.Decide(p, scheduler.Request{}, small, draws(0.1, 0.1), &fresh); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(reused.Deployments, fresh.Deployments) || !reflect.DeepEqual(reused.Instances, fresh.Instances) ||
		reused.Excluded != fresh.Excluded || reused.Deployment != fresh.Deployment || reused.Instance != fresh.Instance {
		t.Fatalf("reused decision differs from a fresh one:\n%+v\n%+v", reused, fresh)
	}
}

func TestDecideDeterministicAndReadOnly(t *testing.T) {
	p := policy(func(p *scheduler.Policy) { p.DeploymentDeltaMs = 20 })
	snap := benchSnapshot(200, 7, 5)
	orig := &scheduler.Snapshot{Deployments: slices.Clone(snap.Deployments), Instances: slices.Clone(snap.Instances)}
	run := func() []int {
		rng := rand.New(rand.NewPCG(42, 43))
		var d scheduler.Decision
		var picks []int
		for range 50 {
			if err := scheduler.Decide(p, scheduler.Request{PromptTokens: 2048, Blocks: 128}, snap, rng, &d); err != nil {
				t.Fatal(err)
			}
			picks = append(picks, d.Instance)
		}
		return picks
	}
	a, b := run(), run()
	if !slices.Equal(a, b) {
		t.Fatalf("same seed, different picks:\n%v\n%v", a, b)
	}
	if !reflect.DeepEqual(orig, snap) {
		t.Fatal("Decide modified the snapshot")
	}
}
