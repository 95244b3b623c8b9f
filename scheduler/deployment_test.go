package scheduler_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/prefixroute/prefixroute/scheduler"
)

func TestDeploymentProbabilitySeed(t *testing.T) {
	stale := hit(0, 10, 4)
	stale.ReportAge = time.Hour
	tests := []struct {
		name    string
		lambda  float64
		blocks  int
		deps    []scheduler.Deployment
		inst    []scheduler.Instance
		want    []float64 // P(d)
		hitWant []float64 // H_d
	}{
		{
			name: "seed: 1:9, A fully hit, B cold, lambda 10 gives P_B = 9/1033", lambda: 10, blocks: 4,
			deps: deps(1, 9), inst: []scheduler.Instance{hit(0, 10, 4), hit(1, 10, 0)},
			want: []float64{1024.0 / 1033, 9.0 / 1033}, hitWant: []float64{1, 0},
		},
		{
			name: "seed: cold on both splits 1:9", lambda: 10, blocks: 4,
			deps: deps(1, 9), inst: []scheduler.Instance{hit(0, 10, 0), hit(1, 10, 0)},
			want: []float64{0.1, 0.9}, hitWant: []float64{0, 0},
		},
		{
			name: "seed: warmed on both splits 1:9 again", lambda: 10, blocks: 4,
			deps: deps(1, 9), inst: []scheduler.Instance{hit(0, 10, 4), hit(1, 10, 4)},
			want: []float64{0.1, 0.9}, hitWant: []float64{1, 1},
		},
		{
			name: "lambda 0 ignores hits", lambda: 0, blocks: 4,
			deps: deps(1, 9), inst: []scheduler.Instance{hit(0, 10, 4), hit(1, 10, 0)},
			want: []float64{0.1, 0.9}, hitWant: []float64{1, 0},
		},
		{
			name: "+0.1 of hit ratio doubles the odds: 5 doublings", lambda: 10, blocks: 4,
			deps: deps(1, 1), inst: []scheduler.Instance{hit(0, 10, 2), hit(1, 10, 0)},
			want: []float64{32.0 / 33, 1.0 / 33}, hitWant: []float64{0.5, 0},
		},
		{
			name: "hit ratio is the best eligible instance's", lambda: 10, blocks: 4,
			deps: deps(1, 1), inst: []scheduler.Instance{hit(0, 10, 1), hit(0, 10, 3), hit(1, 10, 0)},
			want: []float64{1 / (1 + math.Exp2(-7.5)), math.Exp2(-7.5) / (1 + math.Exp2(-7.5))}, hitWant: []float64{0.75, 0},
		},
		{
			name: "an ineligible instance's hit does not count", lambda: 10, blocks: 4,
			deps: deps(1, 9), inst: []scheduler.Instance{stale, hit(0, 10, 0), hit(1, 10, 0)},
			want: []float64{0.1, 0.9}, hitWant: []float64{0, 0},
		},
		{
			name: "matched above Blocks clamps to a ratio of 1", lambda: 10, blocks: 4,
			deps: deps(1, 9), inst: []scheduler.Instance{hit(0, 10, 40), hit(1, 10, 0)},
			want: []float64{1024.0 / 1033, 9.0 / 1033}, hitWant: []float64{1, 0},
		},
		{
			name: "no block hashes: ratio 0", lambda: 10, blocks: 0,
			deps: deps(1, 9), inst: []scheduler.Instance{hit(0, 10, 4), hit(1, 10, 0)},
			want: []float64{0.1, 0.9}, hitWant: []float64{0, 0},
		},
		{
			name: "weight 0 and empty deployments are renormalised away", lambda: 10, blocks: 4,
			deps: deps(1, 0, 9, 3), inst: []scheduler.Instance{hit(0, 10, 4), hit(1, 10, 4), hit(2, 10, 0)},
			want: []float64{1024.0 / 1033, 0, 9.0 / 1033, 0}, hitWant: []float64{1, 1, 0, 0},
		},
		{
			name: "lambda 100", lambda: 100, blocks: 4,
			deps: deps(1, 1), inst: []scheduler.Instance{hit(0, 10, 4), hit(1, 10, 0)},
			want: []float64{1, 1 / (math.Exp2(100) + 1)}, hitWant: []float64{1, 0},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := policy(func(p *scheduler.Policy) { p.LambdaH = tt.lambda })
			snap := &scheduler.Snapshot{Deployments: tt.deps, Instances: tt.inst}
			d := decide(t, p, scheduler.Request{PromptTokens: 64, Blocks: tt.blocks}, snap)
			checkInvariants(t, snap, d, nil, 1e-12)
			for k, want := range tt.want {
				dr := d.Deployments[k]
				near(t, "P("+tt.deps[k].Name+")", dr.Probability, want, 1e-12)
				near(t, "H("+tt.deps[k].Name+")", dr.HitRatio, tt.hitWant[k], 0)
				if dr.Weight != tt.deps[k].Weight || dr.LoadMs != 0 {
					t.Errorf("deployment %d audit %+v", k, dr)
				}
			}
		})
	}
}

func TestDeploymentReasons(t *testing.T) {
	drain := q(4, 1)
	drain.Draining = true
	snap := &scheduler.Snapshot{
		Deployments: []scheduler.Deployment{
			{Name: "ok", Weight: 1},
			{Name: "unweighted", Weight: 0, Unweighted: true},
			{Name: "zero", Weight: 0},
			{Name: "empty", Weight: 1},
			{Name: "drained", Weight: 1},
			{Name: "zero and empty", Weight: 0},
			{Name: "unweighted flag ignored with a weight", Weight: 2, Unweighted: true},
		},
		Instances: []scheduler.Instance{q(0, 1), q(1, 1), q(2, 1), drain, q(6, 1)},
	}
	want := []scheduler.Reason{
		scheduler.ReasonNone, scheduler.ReasonUnweighted, scheduler.ReasonZeroWeight, scheduler.ReasonNoEligibleInstance,
		scheduler.ReasonNoEligibleInstance, scheduler.ReasonZeroWeight, scheduler.ReasonNone,
	}
	d := decide(t, policy(nil), scheduler.Request{}, snap)
	checkInvariants(t, snap, d, nil, 1e-12)
	for k, dr := range d.Deployments {
		if dr.Reason != want[k] {
			t.Errorf("%s: reason %q, want %q", snap.Deployments[k].Name, dr.Reason, want[k])
		}
	}
	near(t, "P(ok)", d.Deployments[0].Probability, 1.0/3, 1e-12)
	near(t, "P(weighted)", d.Deployments[6].Probability, 2.0/3, 1e-12)
	// Eligible instances of weight 0 deployments took part in the model:
	// reason none, P(i|d) = 1, Joint = 0.
	for _, i := range []int{1, 2} {
		r := d.Instances[i]
		if r.Reason != scheduler.ReasonNone || r.Probability != 1 || r.Joint != 0 {
			t.Errorf("instance %d of a weight 0 deployment: %+v", i, r)
		}
	}
}

func TestAllWeightsZero(t *testing.T) {
	snap := &scheduler.Snapshot{
		Deployments: []scheduler.Deployment{{Name: "old", Weight: 0}, {Name: "new", Unweighted: true}, {Name: "empty", Weight: 5}},
		Instances:   []scheduler.Instance{q(0, 100), q(0, 120), q(1, 5)},
	}
	var d scheduler.Decision
	rng := draws(0, 0)
	err := scheduler.Decide(policy(nil), scheduler.Request{}, snap, rng, &d)
	if !errors.Is(err, scheduler.ErrAllWeightsZero) {
		t.Fatalf("err = %v, want ErrAllWeightsZero", err)
	}
	checkInvariants(t, snap, &d, err, 0)
	if rng.calls != 0 {
		t.Fatalf("RNG called %d times", rng.calls)
	}
	// The audit is complete: P(i|d) of the weight 0 deployments.
	near(t, "P(old-0|old)", d.Instances[0].Probability, 2.0/3, 1e-12)
	near(t, "P(old-1|old)", d.Instances[1].Probability, 1.0/3, 1e-12)
	near(t, "P(new-0|new)", d.Instances[2].Probability, 1, 0)
	wantReasons := []scheduler.Reason{scheduler.ReasonZeroWeight, scheduler.ReasonUnweighted, scheduler.ReasonNoEligibleInstance}
	for k, dr := range d.Deployments {
		if dr.Reason != wantReasons[k] || dr.Probability != 0 {
			t.Errorf("deployment %d: %+v", k, dr)
		}
	}
}

func TestLoadTermOffIsSeedFormula(t *testing.T) {
	// Very different loads; with the load term off only weights and hits count.
	snap := &scheduler.Snapshot{
		Deployments: deps(1, 9),
		Instances:   []scheduler.Instance{hit(0, 5000, 4), hit(0, 9000, 4), hit(1, 0, 0)},
	}
	d := decide(t, policy(nil), scheduler.Request{Blocks: 4}, snap)
	near(t, "P_A", d.Deployments[0].Probability, 1024.0/1033, 1e-12)
	near(t, "P_B", d.Deployments[1].Probability, 9.0/1033, 1e-12)
	if d.Deployments[0].LoadMs != 0 || d.Deployments[1].LoadMs != 0 {
		t.Fatalf("LoadMs filled with the load term off: %+v", d.Deployments)
	}
}

func TestLoadTerm(t *testing.T) {
	softMin := func(delta float64, loads ...float64) float64 {
		m := 0.0
		for _, x := range loads {
			m += math.Pow(2, -x/delta)
		}
		return -delta * math.Log2(m/float64(len(loads)))
	}
	tests := []struct {
		name      string
		delta     float64
		batchWait float64
		weights   []float64
		inst      []scheduler.Instance
		loads     [][]float64 // per deployment, the expected q_i
		mostly    int         // a deployment expected to get > 95%, or -1
	}{
		{
			name: "queueing outweighs the cache", delta: 10, weights: []float64{1, 1},
			inst:  []scheduler.Instance{hit(0, 200, 4), hit(0, 220, 4), hit(1, 0, 0)},
			loads: [][]float64{{200, 220}, {0}}, mostly: 1,
		},
		{
			name: "cutover 1:9, old deployment queues 300 ms", delta: 25, weights: []float64{1, 9},
			inst:  []scheduler.Instance{hit(0, 300, 4), hit(0, 320, 4), hit(0, 400, 3), hit(1, 10, 0), hit(1, 0, 0)},
			loads: [][]float64{{300, 320, 400}, {10, 0}}, mostly: 1,
		},
		{
			name: "batch wait shifts every load alike", delta: 20, batchWait: 7, weights: []float64{1, 1},
			inst:  []scheduler.Instance{hit(0, 0, 4), hit(0, 20, 4), hit(1, 50, 0)},
			loads: [][]float64{{7, 27}, {57}}, mostly: -1,
		},
		{
			name: "equal loads: the seed's formula", delta: 20, weights: []float64{1, 9},
			inst:  []scheduler.Instance{hit(0, 30, 4), hit(1, 30, 0)},
			loads: [][]float64{{30}, {30}}, mostly: -1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := policy(func(p *scheduler.Policy) { p.DeploymentDeltaMs, p.BatchWaitMs = tt.delta, tt.batchWait })
			snap := &scheduler.Snapshot{Deployments: deps(tt.weights...), Instances: tt.inst}
			d := decide(t, p, scheduler.Request{Blocks: 4}, snap)
			checkInvariants(t, snap, d, nil, 1e-12)
			L := make([]float64, len(tt.loads))
			lmin := math.Inf(1)
			for k, loads := range tt.loads {
				L[k] = softMin(tt.delta, loads...)
				lmin = min(lmin, L[k])
				near(t, "LoadMs", d.Deployments[k].LoadMs, L[k], 1e-9)
			}
			terms := make([]float64, len(L))
			sum := 0.0
			for k := range L {
				terms[k] = tt.weights[k] * math.Pow(2, 10*d.Deployments[k].HitRatio) * math.Pow(2, -(L[k]-lmin)/tt.delta)
				sum += terms[k]
			}
			for k := range L {
				near(t, "P(d)", d.Deployments[k].Probability, terms[k]/sum, 1e-12)
			}
			if tt.mostly >= 0 && d.Deployments[tt.mostly].Probability < 0.95 {
				t.Errorf("the cold, idle deployment gets only %v", d.Deployments[tt.mostly].Probability)
			}
		})
	}
}

func TestLoadTermSoftMinBounds(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	for trial := range 200 {
		n := 1 + rng.IntN(20)
		delta := math.Pow(10, rng.Float64()*7-3) // 1e-3 .. 1e4 ms
		inst := make([]scheduler.Instance, n, n+1)
		lo, mean := math.Inf(1), 0.0
		for i := range inst {
			x := rng.Float64() * math.Pow(10, float64(rng.IntN(7)))
			inst[i] = q(0, x)
			lo = min(lo, x)
			mean += x / float64(n)
		}
		inst = append(inst, q(1, 0))
		p := policy(func(p *scheduler.Policy) { p.DeploymentDeltaMs = delta })
		snap := &scheduler.Snapshot{Deployments: deps(1, 1), Instances: inst}
		d := decide(t, p, scheduler.Request{}, snap)
		checkInvariants(t, snap, d, nil, 1e-12)
		if L := d.Deployments[0].LoadMs; L < lo || L > mean*(1+1e-12)+1e-12 {
			t.Fatalf("trial %d: soft-min %v outside [min %v, mean %v]", trial, L, lo, mean)
		}
	}
}
