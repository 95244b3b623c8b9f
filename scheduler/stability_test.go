package scheduler_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/prefixroute/prefixroute/scheduler"
)

func TestNumericalStability(t *testing.T) {
	pool := func(weights []float64, inst ...scheduler.Instance) *scheduler.Snapshot {
		return &scheduler.Snapshot{Deployments: deps(weights...), Instances: inst}
	}
	tests := []struct {
		name   string
		set    func(*scheduler.Policy)
		blocks int
		snap   *scheduler.Snapshot
		want   []float64 // P(i|d) when not nil
		wantD  []float64 // P(d) when not nil
		tol    float64
		wantL  []float64 // LoadMs when not nil, relative tolerance tolL
		tolL   float64
	}{
		{
			name: "costs of 1e-3 ms at the smallest delta, 1e-3", set: func(p *scheduler.Policy) { p.DeltaMs = scheduler.MinDeltaMs },
			snap: pool([]float64{1}, q(0, 1e-3), q(0, 2e-3), q(0, 3e-3)),
			want: []float64{4.0 / 7, 2.0 / 7, 1.0 / 7}, tol: 1e-9,
		},
		{
			name: "costs of 1e-6 ms at delta 20 are a tie",
			snap: pool([]float64{1}, q(0, 1e-6), q(0, 2e-6)),
			want: []float64{1 / (1 + math.Exp2(-1e-6/20)), 1 / (1 + math.Exp2(1e-6/20))}, tol: 1e-15,
		},
		{
			name: "costs of 1e6 ms: 2^(-1e6/20) underflows without the shift",
			snap: pool([]float64{1}, q(0, 1e6), q(0, 1e6+20), q(0, 1e6+40)),
			want: []float64{4.0 / 7, 2.0 / 7, 1.0 / 7}, tol: 1e-12,
		},
		{
			name: "1e-6 ms next to 1e6 ms",
			snap: pool([]float64{1}, q(0, 1e-6), q(0, 1e6)),
			want: []float64{1, 0}, tol: 0,
		},
		{
			name: "1e-6 ms next to 1e6 ms at delta 1e6", set: func(p *scheduler.Policy) { p.DeltaMs = 1e6 },
			snap: pool([]float64{1}, q(0, 1e-6), q(0, 1e6)),
			want: []float64{2.0 / 3, 1.0 / 3}, tol: 1e-12,
		},
		{
			name: "the smallest valid delta: 1 ms more is 1000 halvings", set: func(p *scheduler.Policy) { p.DeltaMs = scheduler.MinDeltaMs },
			snap: pool([]float64{1}, q(0, 100), q(0, 100), q(0, 101)),
			want: []float64{0.5, 0.5, 0}, tol: 1e-300,
		},
		{
			name: "lambda 100 with weights 1e300 : 1e-300", set: func(p *scheduler.Policy) { p.LambdaH = 100 }, blocks: 4,
			snap:  pool([]float64{1e-300, 1e300}, hit(0, 1, 4), hit(1, 1, 0)),
			wantD: []float64{math.Exp2(math.Log2(1e-300) + 100 - math.Log2(1e300)), 1}, tol: 1e-12,
		},
		{
			name: "lambda 100 with huge equal weights: naive sums overflow", set: func(p *scheduler.Policy) { p.LambdaH = 100 }, blocks: 4,
			snap:  pool([]float64{math.MaxFloat64, math.MaxFloat64}, hit(0, 1, 4), hit(1, 1, 4)),
			wantD: []float64{0.5, 0.5}, tol: 1e-15,
		},
		{
			name: "the smallest weight", blocks: 4,
			snap:  pool([]float64{5e-324, 1}, hit(0, 1, 0), hit(1, 1, 0)),
			wantD: []float64{0, 1}, tol: 1e-300,
		},
		{
			name:  "log-space fallback: tiny weight, no load, against the largest weight 2000 doublings behind",
			set:   func(p *scheduler.Policy) { p.DeploymentDeltaMs = 1 },
			snap:  pool([]float64{5e-324, math.MaxFloat64}, q(0, 0), q(1, 2000)),
			wantD: []float64{0x1p-98, 1}, tol: 1e-40,
		},
		{
			name: "log-space fallback: weights 1e-300 : 1e300, the heavy one 2000 doublings behind",
			set:  func(p *scheduler.Policy) { p.DeploymentDeltaMs = 1 },
			snap: pool([]float64{1e-300, 1e300}, q(0, 0), q(1, 2000)),
			wantD: []float64{
				1 / (1 + math.Exp2(math.Log2(1e300)-2000-math.Log2(1e-300))),
				1 - 1/(1+math.Exp2(math.Log2(1e300)-2000-math.Log2(1e-300))),
			}, tol: 1e-12,
		},
		{
			name:  "load term with the largest delta: the mean of the loads",
			set:   func(p *scheduler.Policy) { p.DeploymentDeltaMs = scheduler.MaxDeltaMs },
			snap:  pool([]float64{1, 1}, q(0, 0), q(0, 2), q(1, 5)),
			wantD: []float64{0.5, 0.5}, tol: 1e-5, // 4 ms / 1e6 ms of a doubling apart
			wantL: []float64{1, 5}, tolL: 1e-6,
		},
		{
			name:  "load term with the smallest delta: the minimum of the loads",
			set:   func(p *scheduler.Policy) { p.DeploymentDeltaMs = scheduler.MinDeltaMs },
			snap:  pool([]float64{1, 1, 1}, q(0, 1), q(1, 1), q(2, 2)),
			wantD: []float64{0.5, 0.5, 0}, tol: 1e-300,
			wantL: []float64{1, 1, 2}, tolL: 0,
		},
		{
			name: "load term with 1e6 ms queues and a tiny delta", set: func(p *scheduler.Policy) { p.DeploymentDeltaMs = 1e-3 },
			snap:  pool([]float64{1, 1}, q(0, 1e6), q(0, 1e6), q(1, 1e6+1e-3)),
			wantD: []float64{2.0 / 3, 1.0 / 3}, tol: 1e-6,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := decide(t, policy(tt.set), scheduler.Request{Blocks: tt.blocks}, tt.snap)
			checkInvariants(t, tt.snap, d, nil, 1e-12)
			for i, want := range tt.want {
				near(t, "P(i|d)", d.Instances[i].Probability, want, tt.tol)
			}
			for k, want := range tt.wantD {
				near(t, "P(d)", d.Deployments[k].Probability, want, tt.tol)
			}
			for k, want := range tt.wantL {
				near(t, "LoadMs", d.Deployments[k].LoadMs, want, tt.tolL*want)
			}
		})
	}
}

func TestTenThousandInstances(t *testing.T) {
	rng := rand.New(rand.NewPCG(10, 10000))
	for _, tc := range []struct {
		name   string
		cost   func(i int) float64
		lambda float64
	}{
		{"costs spread over 1e-6 .. 1e6 ms", func(int) float64 { return math.Pow(10, 12*rng.Float64()-6) }, 10},
		{"all equal", func(int) float64 { return 42 }, 100},
		{"within 1e-6 ms", func(int) float64 { return 1e-6 * rng.Float64() }, 100},
		{"around 1e6 ms", func(int) float64 { return 1e6 + 100*rng.Float64() }, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			snap := &scheduler.Snapshot{Deployments: deps(1, 2, 3, 4, 5, 6, 7, 8), Instances: make([]scheduler.Instance, 10000)}
			for i := range snap.Instances {
				snap.Instances[i] = hit(i%8, tc.cost(i), rng.IntN(65))
			}
			d := decide(t, policy(func(p *scheduler.Policy) { p.LambdaH = tc.lambda }), scheduler.Request{Blocks: 64}, snap)
			checkInvariants(t, snap, d, nil, 1e-12)
			total := 0.0
			for _, r := range d.Instances {
				total += r.Joint
			}
			near(t, "sum of Joint", total, 1, 1e-12)
		})
	}
}
