package scheduler_test

import (
	"math/rand/v2"
	"testing"

	"github.com/prefixroute/prefixroute/scheduler"
)

// chiSquare001 holds the chi-square critical values at p = 0.001 by degrees
// of freedom.
var chiSquare001 = map[int]float64{4: 18.467, 5: 20.515, 7: 24.322}

// TestSamplingMatchesProbabilities draws 100,000 decisions with a fixed PCG
// seed and checks by a chi-square test at p = 0.001 that the frequencies of
// the chosen instances match the reported Joint probabilities. The seed is
// fixed, so the test is deterministic.
func TestSamplingMatchesProbabilities(t *testing.T) {
	excluded := q(1, 0)
	excluded.Excluded = true
	tests := []struct {
		name string
		set  func(*scheduler.Policy)
		snap *scheduler.Snapshot
		df   int
	}{
		{
			name: "softmax, weights 1:3, A partly hit",
			snap: &scheduler.Snapshot{
				Deployments: deps(1, 3),
				Instances: []scheduler.Instance{
					hit(0, 100, 1), hit(0, 110, 0), hit(0, 125, 0), hit(0, 140, 0),
					q(1, 10), q(1, 20), excluded, q(1, 30), q(1, 45),
				},
			},
			df: 7,
		},
		{
			name: "threshold, three deployments, one drained",
			set:  func(p *scheduler.Policy) { p.Strategy = scheduler.Threshold },
			snap: &scheduler.Snapshot{
				Deployments: deps(2, 0, 1),
				Instances: []scheduler.Instance{
					hit(0, 100, 4), hit(0, 115, 4), hit(0, 120, 0), hit(0, 121, 4), // 3 kept
					q(1, 1), q(1, 1), // weight 0
					q(2, 300), q(2, 301), q(2, 500), // 2 kept
				},
			},
			df: 4, // 5 cells
		},
	}
	const n = 100_000
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := policy(tt.set)
			req := scheduler.Request{Blocks: 4}
			rng := rand.New(rand.NewPCG(20261201, 1))
			var d scheduler.Decision
			counts := make([]int, len(tt.snap.Instances))
			var joint []float64
			for range n {
				if err := scheduler.Decide(p, req, tt.snap, rng, &d); err != nil {
					t.Fatal(err)
				}
				counts[d.Instance]++
				if joint == nil {
					for _, r := range d.Instances {
						joint = append(joint, r.Joint)
					}
				}
			}
			chi2, chi2Uniform, cells := 0.0, 0.0, 0
			for _, j := range joint {
				if j > 0 {
					cells++
				}
			}
			for i, c := range counts {
				if joint[i] == 0 {
					if c != 0 {
						t.Fatalf("instance %d has probability 0 but was chosen %d times", i, c)
					}
					continue
				}
				want := n * joint[i]
				chi2 += (float64(c) - want) * (float64(c) - want) / want
				uniform := float64(n) / float64(cells)
				chi2Uniform += (float64(c) - uniform) * (float64(c) - uniform) / uniform
			}
			if cells-1 != tt.df {
				t.Fatalf("%d cells, the test is set up for %d degrees of freedom", cells, tt.df)
			}
			crit := chiSquare001[tt.df]
			t.Logf("chi-square %.3f with %d degrees of freedom (critical value at p = 0.001: %.3f)", chi2, tt.df, crit)
			if chi2 > crit {
				t.Fatalf("chi-square %.3f > %.3f: frequencies %v do not match probabilities %v", chi2, crit, counts, joint)
			}
			// The test has power: the same frequencies reject a uniform choice.
			if chi2Uniform <= crit {
				t.Fatalf("chi-square against uniform %.3f <= %.3f: the test cannot tell", chi2Uniform, crit)
			}
		})
	}
}
