package scheduler_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/prefixroute/prefixroute/scheduler"
)

// objective is sum_i p_i S_i + tau KL(p || uniform), with tau = delta/ln 2.
func objective(p, s []float64, delta float64) float64 {
	tau := delta / math.Ln2
	n := float64(len(p))
	j := 0.0
	for i := range p {
		j += p[i] * s[i]
		if p[i] > 0 {
			j += tau * p[i] * math.Log(p[i]*n)
		}
	}
	return j
}

// checkSoftmaxOptimal checks that the softmax distribution minimises the
// objective over random distributions and small perturbations of it, and
// that its value is -tau ln Z.
func checkSoftmaxOptimal(t *testing.T, seed uint64, n int, delta float64) {
	rng := rand.New(rand.NewPCG(seed, 7))
	costs := make([]float64, n)
	for i := range costs {
		costs[i] = 5 * delta * rng.Float64()
	}
	snap := &scheduler.Snapshot{Deployments: deps(1), Instances: make([]scheduler.Instance, n)}
	for i, c := range costs {
		snap.Instances[i] = q(0, c)
	}
	d := decide(t, policy(func(p *scheduler.Policy) { p.DeltaMs = delta }), scheduler.Request{}, snap)
	pstar := make([]float64, n)
	for i, r := range d.Instances {
		pstar[i] = r.Probability
	}
	best := objective(pstar, costs, delta)
	tau := delta / math.Ln2
	z := 0.0 // Z = sum_i u_i e^(-S_i/tau)
	for _, c := range costs {
		z += math.Exp(-c/tau) / float64(n)
	}
	tol := 1e-12 * (1 + math.Abs(best) + tau)
	near(t, "J(p*) vs -tau ln Z", best, -tau*math.Log(z), tol)

	other := make([]float64, n)
	for trial := range 60 {
		sum := 0.0
		switch {
		case trial < 30: // a random distribution, some entries 0
			for i := range other {
				other[i] = rng.ExpFloat64()
				if rng.IntN(4) == 0 {
					other[i] = 0
				}
				sum += other[i]
			}
			if sum == 0 {
				other[0], sum = 1, 1
			}
			for i := range other {
				other[i] /= sum
			}
		default: // p* + e*v, v summing to 0, small enough to stay >= 0
			v := make([]float64, n)
			for i := range v {
				v[i] = rng.NormFloat64()
				sum += v[i]
			}
			e := math.Pow(10, -1-4*rng.Float64())
			for i := range v {
				v[i] -= sum / float64(n)
			}
			for i := range v {
				if v[i] < 0 {
					e = min(e, pstar[i]/-v[i])
				}
			}
			for i := range other {
				other[i] = max(0, pstar[i]+e*v[i])
			}
		}
		if j := objective(other, costs, delta); j < best-tol {
			t.Fatalf("trial %d: J(q) = %.17g < J(p*) = %.17g", trial, j, best)
		}
	}
}

func FuzzSoftmaxOptimal(f *testing.F) {
	f.Add(uint64(1), uint8(2), 20.0)
	f.Add(uint64(2), uint8(10), 1.0)
	f.Add(uint64(3), uint8(64), 500.0)
	f.Fuzz(func(t *testing.T, seed uint64, n uint8, delta float64) {
		if !(delta >= 1e-3 && delta <= 1e6) {
			delta = 20
		}
		checkSoftmaxOptimal(t, seed, 2+int(n%100), delta)
	})
}

func TestSoftmaxOptimal(t *testing.T) {
	for seed := range uint64(100) {
		checkSoftmaxOptimal(t, seed, 2+int(seed%40), math.Pow(10, float64(seed%5)-1))
	}
}
