package scheduler_test

import (
	"testing"

	"github.com/prefixroute/prefixroute/scheduler"
)

// costs returns one deployment's instances with the given costs.
func costs(cs ...float64) []scheduler.Instance {
	out := make([]scheduler.Instance, len(cs))
	for i, c := range cs {
		out[i] = q(0, c)
	}
	return out
}

func TestSoftmaxSeed(t *testing.T) {
	tests := []struct {
		name  string
		delta float64
		inst  []scheduler.Instance
		want  []float64
	}{
		{"seed: a 20 ms gap at delta 20 gives 2/3 and 1/3", 20, costs(100, 120), []float64{2.0 / 3, 1.0 / 3}},
		{"seed: a 40 ms gap gives 0.8 and 0.2", 20, costs(100, 140), []float64{0.8, 0.2}},
		{"order does not matter", 20, costs(120, 100), []float64{1.0 / 3, 2.0 / 3}},
		{"equal costs split evenly", 20, costs(100, 100), []float64{0.5, 0.5}},
		{"each delta halves the odds", 20, costs(100, 120, 140), []float64{4.0 / 7, 2.0 / 7, 1.0 / 7}},
		{"a larger delta spreads: 40 ms gap at delta 40", 40, costs(100, 140), []float64{2.0 / 3, 1.0 / 3}},
		{"a smaller delta concentrates: 40 ms gap at delta 10", 10, costs(100, 140), []float64{16.0 / 17, 1.0 / 17}},
		{"a single instance gets 1", 20, costs(1234), []float64{1}},
		{
			"costs from prefill and queue: hit 0+100, cold 64+56", 20,
			[]scheduler.Instance{
				{ID: "hit", MatchedBlocks: 4, PrefillTokensPerSecond: 1000, HasQueueMs: true, QueueMs: 100},
				{ID: "cold", PrefillTokensPerSecond: 1000, HasQueueMs: true, QueueMs: 56},
			},
			[]float64{2.0 / 3, 1.0 / 3},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := policy(func(p *scheduler.Policy) { p.DeltaMs, p.DoublingContextTokens = tt.delta, 0 }) // the seed's linear prefill
			snap := &scheduler.Snapshot{Deployments: deps(1), Instances: tt.inst}
			d := decide(t, p, scheduler.Request{PromptTokens: 64, Blocks: 4}, snap)
			checkInvariants(t, snap, d, nil, 1e-12)
			for i, want := range tt.want {
				near(t, "P(i|d)", d.Instances[i].Probability, want, 1e-12)
				near(t, "Joint", d.Instances[i].Joint, want, 1e-12)
				if d.Instances[i].Reason != scheduler.ReasonNone {
					t.Errorf("instance %d: reason %q", i, d.Instances[i].Reason)
				}
			}
		})
	}
}

func TestThreshold(t *testing.T) {
	tests := []struct {
		name       string
		ratio, min float64
		costs      []float64
		kept       []bool
	}{
		{"seed: band max(0.1*100, 20) = 20 ms", 0.1, 20, []float64{100, 110, 120, 120.001, 300}, []bool{true, true, true, false, false}},
		{"band max(0.1*500, 20) = 50 ms", 0.1, 20, []float64{550, 500, 551, 525}, []bool{true, true, false, true}},
		{"zero minimum: the 20 ms floor", 0.1, 20, []float64{0, 20, 20.5}, []bool{true, true, false}},
		{"no band: exact ties only", 0, 0, []float64{100, 100, 100.5}, []bool{true, true, false}},
		{"a wide band keeps all", 10, 0, []float64{100, 500, 1100}, []bool{true, true, true}},
		{"a single instance is kept", 0.1, 20, []float64{7}, []bool{true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := policy(func(p *scheduler.Policy) {
				p.Strategy, p.ThresholdRatio, p.ThresholdMinMs = scheduler.Threshold, tt.ratio, tt.min
			})
			snap := &scheduler.Snapshot{Deployments: deps(1), Instances: costs(tt.costs...)}
			d := decide(t, p, scheduler.Request{}, snap)
			checkInvariants(t, snap, d, nil, 1e-12)
			n := 0
			for _, k := range tt.kept {
				if k {
					n++
				}
			}
			for i, k := range tt.kept {
				r := d.Instances[i]
				if k {
					near(t, "P(kept)", r.Probability, 1/float64(n), 1e-15)
					if r.Reason != scheduler.ReasonNone {
						t.Errorf("kept instance %d has reason %q", i, r.Reason)
					}
				} else if r.Probability != 0 || r.Reason != scheduler.ReasonThreshold {
					t.Errorf("instance %d (cost %v) kept: %+v", i, tt.costs[i], r)
				}
			}
			if got := d.Excluded[scheduler.ReasonThreshold]; got != len(tt.kept)-n {
				t.Errorf("Excluded[outside_threshold] = %d, want %d", got, len(tt.kept)-n)
			}
		})
	}
}

func TestArgmin(t *testing.T) {
	tests := []struct {
		name  string
		costs []float64
		want  []float64
	}{
		{"a tie splits evenly", []float64{100, 100.0000001, 100, 200}, []float64{0.5, 0, 0.5, 0}},
		{"a three-way tie", []float64{5, 5, 5}, []float64{1.0 / 3, 1.0 / 3, 1.0 / 3}},
		{"a unique minimum takes all", []float64{30, 10, 20}, []float64{0, 1, 0}},
		{"zero costs tie", []float64{0, 0, 1e-300}, []float64{0.5, 0.5, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := policy(func(p *scheduler.Policy) { p.Strategy = scheduler.Argmin })
			snap := &scheduler.Snapshot{Deployments: deps(1), Instances: costs(tt.costs...)}
			d := decide(t, p, scheduler.Request{}, snap)
			checkInvariants(t, snap, d, nil, 1e-12)
			cut := 0
			for i, want := range tt.want {
				r := d.Instances[i]
				near(t, "P(i|d)", r.Probability, want, 1e-15)
				wantReason := scheduler.ReasonNone
				if want == 0 {
					wantReason = scheduler.ReasonNotMinimum
					cut++
				}
				if r.Reason != wantReason {
					t.Errorf("instance %d: reason %q, want %q", i, r.Reason, wantReason)
				}
			}
			if d.Excluded[scheduler.ReasonNotMinimum] != cut {
				t.Errorf("Excluded[not_minimum] = %d, want %d", d.Excluded[scheduler.ReasonNotMinimum], cut)
			}
			if d.Instances[d.Instance].Probability == 0 {
				t.Errorf("chose a non-minimum instance %d", d.Instance)
			}
		})
	}
}

// P(i|d) is computed in every deployment with an eligible instance, drawn or
// not, so the Joints of the pool sum to 1.
func TestInstanceProbabilityForEveryDeployment(t *testing.T) {
	for _, s := range []scheduler.Strategy{scheduler.Softmax, scheduler.Threshold, scheduler.Argmin} {
		t.Run(s.String(), func(t *testing.T) {
			p := policy(func(p *scheduler.Policy) { p.Strategy = s })
			snap := &scheduler.Snapshot{
				Deployments: deps(1, 1, 0),
				Instances:   []scheduler.Instance{q(0, 100), q(0, 140), q(1, 10), q(1, 50), q(2, 1), q(2, 1)},
			}
			var d scheduler.Decision
			if err := scheduler.Decide(p, scheduler.Request{}, snap, draws(0.25, 0.5), &d); err != nil {
				t.Fatal(err)
			}
			checkInvariants(t, snap, &d, nil, 1e-12)
			if d.Deployment != 0 {
				t.Fatalf("deployment %d drawn with u = 0.25, want 0", d.Deployment)
			}
			joint := 0.0
			for _, r := range d.Instances {
				joint += r.Joint
			}
			near(t, "sum of Joint", joint, 1, 1e-12)
			// Not drawn, still in the model.
			if r := d.Instances[2]; r.Reason != scheduler.ReasonNone || r.Probability <= 0 || r.Joint <= 0 {
				t.Fatalf("cheapest instance of the deployment not drawn: %+v", r)
			}
			// Weight 0: P(i|d) but no Joint.
			for _, r := range d.Instances[4:] {
				if r.Reason != scheduler.ReasonNone || r.Probability != 0.5 || r.Joint != 0 {
					t.Fatalf("instance of the weight 0 deployment: %+v", r)
				}
			}
		})
	}
}
