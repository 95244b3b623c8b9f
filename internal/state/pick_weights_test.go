package state

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/prefixroute/prefixroute/scheduler"
)

// buildDeterministicPool builds the same pool every time: three
// deployments, loads, exact and approximate caches, weights.
func buildDeterministicPool(t *testing.T) *Pool {
	_, p := newTestPool(t, Limits{})
	cfg := DefaultConfig()
	cfg.Weights = map[string]float64{"old": 3, "new": 1, "empty": 2}
	cfg.WeightsVersion = 7
	p.SetConfig(cfg)
	for i := range 12 {
		dep := [...]string{"old", "new", "other"}[i%3]
		rep := &Report{QueuedPrefillTokens: uint64(100 * i), ReportsCacheEvents: i%2 == 0, KVCacheUsage: float64(i) / 20}
		if rep.ReportsCacheEvents {
			rep.Stored = []uint64{1, 2, 3, uint64(10 + i)}[:1+i%4]
		}
		connect(t, p, t0.Add(time.Duration(i)*time.Millisecond), dep, fmt.Sprintf("i%02d", i), rep)
	}
	var pk Pick
	rng := rand.New(rand.NewPCG(77, 77))
	for range 20 {
		if err := p.Pick(t0.Add(time.Second), &PickInput{Hashes: []uint64{1, 2, 3, 4}, PromptTokens: 200}, rng, &pk); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

// TestPickDeterministic: the same state and the same seed give the same
// choice and an identical Decision and Snapshot, with a fresh or a reused
// Pick.
func TestPickDeterministic(t *testing.T) {
	in := &PickInput{Hashes: []uint64{1, 2, 3, 9}, PromptTokens: 300, Exclude: []string{"i04"}}
	now := t0.Add(1500 * time.Millisecond)
	var first Pick
	pickOnce(t, buildDeterministicPool(t), now, in, 4242, &first)
	reused := Pick{}
	pickOnce(t, buildDeterministicPool(t), now, &PickInput{Hashes: make([]uint64, 500), PromptTokens: 9000}, 1, &reused)
	for trial := range 3 {
		var fresh Pick
		out := &fresh
		if trial == 2 {
			out = &reused
		}
		pickOnce(t, buildDeterministicPool(t), now, in, 4242, out)
		if out.Decision.Instance != first.Decision.Instance || out.Decision.Deployment != first.Decision.Deployment {
			t.Fatalf("trial %d: chose %d/%d, first %d/%d", trial, out.Decision.Deployment, out.Decision.Instance,
				first.Decision.Deployment, first.Decision.Instance)
		}
		if !reflect.DeepEqual(out.Decision, first.Decision) {
			t.Fatalf("trial %d: decisions differ:\n%+v\n%+v", trial, out.Decision, first.Decision)
		}
		if !reflect.DeepEqual(out.Snapshot, first.Snapshot) || !reflect.DeepEqual(out.Addresses, first.Addresses) {
			t.Fatalf("trial %d: snapshots differ", trial)
		}
	}
	if first.Config.WeightsVersion != 7 {
		t.Fatalf("config version %d", first.Config.WeightsVersion)
	}
	// A different seed draws differently.
	var other Pick
	pickOnce(t, buildDeterministicPool(t), now, in, 4243, &other)
	if other.Decision.DeploymentDraw == first.Decision.DeploymentDraw {
		t.Fatal("different seeds drew the same")
	}
}

// TestPickWeights: deployment-level probabilities from the state's weights.
func TestPickWeights(t *testing.T) {
	setup := func(t *testing.T, weights map[string]float64) *Pool {
		_, p := newTestPool(t, Limits{})
		if weights != nil {
			cfg := DefaultConfig()
			cfg.Weights = weights
			p.SetConfig(cfg)
		}
		for i, dep := range []string{"a", "b", "b", "c", "c", "c"} {
			connect(t, p, t0, dep, fmt.Sprint("i", i), &Report{})
		}
		return p
	}
	depProb := func(pk *Pick) map[string]float64 {
		m := map[string]float64{}
		for k, d := range pk.Snapshot.Deployments {
			m[d.Name] = pk.Decision.Deployments[k].Probability
		}
		return m
	}
	t.Run("unset weights split equally over deployments", func(t *testing.T) {
		p := setup(t, nil)
		var pk Pick
		rng := rand.New(rand.NewPCG(5, 5))
		counts := map[string]int{}
		for range 3000 {
			// Prompt 0: no assigned work, no recorded blocks; state unchanged.
			if err := p.Pick(t0, &PickInput{}, rng, &pk); err != nil {
				t.Fatal(err)
			}
			counts[pk.Snapshot.Deployments[pk.Decision.Deployment].Name]++
		}
		for name, pr := range depProb(&pk) {
			if !near(pr, 1.0/3) {
				t.Errorf("P(%s) = %v, want 1/3", name, pr)
			}
		}
		for k, d := range pk.Snapshot.Deployments {
			if d.Weight != 1 || d.Unweighted || pk.Decision.Deployments[k].Reason != scheduler.ReasonNone {
				t.Errorf("deployment %+v, reason %v", d, pk.Decision.Deployments[k].Reason)
			}
		}
		// Within c, each of the three instances gets 1/3 of 1/3.
		for i, r := range pk.Decision.Instances {
			if pk.Snapshot.Instances[i].Deployment == 2 && !near(r.Joint, 1.0/9) {
				t.Errorf("instance %d joint %v, want 1/9", i, r.Joint)
			}
		}
		if want := map[string]int{"a": 1030, "b": 962, "c": 1008}; !reflect.DeepEqual(counts, want) {
			t.Errorf("counts %v, want %v (seeded)", counts, want)
		}
	})
	t.Run("a deployment missing from the weights is unweighted", func(t *testing.T) {
		p := setup(t, map[string]float64{"a": 1, "b": 3, "z": 2})
		var pk Pick
		pickOnce(t, p, t0, &PickInput{}, 1, &pk)
		got := depProb(&pk)
		if !near(got["a"], 0.25) || !near(got["b"], 0.75) || got["c"] != 0 || got["z"] != 0 {
			t.Errorf("probabilities %v", got)
		}
		for k, d := range pk.Snapshot.Deployments {
			want := map[string]scheduler.Reason{"c": scheduler.ReasonUnweighted, "z": scheduler.ReasonNoEligibleInstance}[d.Name]
			if r := pk.Decision.Deployments[k].Reason; r != want {
				t.Errorf("%s: reason %v, want %v", d.Name, r, want)
			}
			if d.Name == "c" && (!d.Unweighted || d.Weight != 0) {
				t.Errorf("c in snapshot: %+v", d)
			}
		}
	})
	t.Run("weight 0 drains a deployment", func(t *testing.T) {
		p := setup(t, map[string]float64{"a": 0, "b": 1, "c": 1})
		var pk Pick
		pickOnce(t, p, t0, &PickInput{}, 1, &pk)
		if got := depProb(&pk); got["a"] != 0 || !near(got["b"], 0.5) {
			t.Errorf("probabilities %v", got)
		}
		if r := pk.Decision.Deployments[0].Reason; r != scheduler.ReasonZeroWeight {
			t.Errorf("a: reason %v", r)
		}
	})
	t.Run("all weights 0", func(t *testing.T) {
		p := setup(t, map[string]float64{"a": 0, "b": 0, "c": 0})
		var pk Pick
		err := p.Pick(t0, &PickInput{Hashes: []uint64{1}, PromptTokens: 100}, rand.New(rand.NewPCG(1, 1)), &pk)
		if !errors.Is(err, scheduler.ErrAllWeightsZero) || pk.Decision.Instance != -1 {
			t.Fatalf("err %v, instance %d", err, pk.Decision.Instance)
		}
		// A failed pick assigns nothing and records nothing.
		for _, st := range p.Instances(t0) {
			if st.AssignedTokens != 0 || st.CachedBlocks != 0 {
				t.Fatalf("failed pick touched %s: %+v", st.Instance, st)
			}
		}
	})
	t.Run("only unweighted deployments", func(t *testing.T) {
		p := setup(t, map[string]float64{"z": 1})
		var pk Pick
		err := p.Pick(t0, &PickInput{}, rand.New(rand.NewPCG(1, 1)), &pk)
		if !errors.Is(err, scheduler.ErrAllWeightsZero) {
			t.Fatalf("err %v", err)
		}
	})
}

// TestPickSeedCutover is the seed's worked number end to end: weights 1:9, A
// holds the prefix (sparse and dense holder sets), B is cold, lambda_h 10:
// P_B = 9 / (2^10 + 9).
func TestPickSeedCutover(t *testing.T) {
	for _, perDep := range []int{1, 100} {
		t.Run(fmt.Sprint(perDep, " instances per deployment"), func(t *testing.T) {
			_, p := newTestPool(t, Limits{})
			cfg := DefaultConfig()
			cfg.Weights = map[string]float64{"A": 1, "B": 9}
			p.SetConfig(cfg)
			hashes := []uint64{7, 8, 9, 10}
			for i := range perDep {
				connect(t, p, t0, "A", fmt.Sprint("a", i), &Report{ReportsCacheEvents: true, Stored: hashes})
				connect(t, p, t0, "B", fmt.Sprint("b", i), &Report{ReportsCacheEvents: true})
			}
			var pk Pick
			pickOnce(t, p, t0, &PickInput{Hashes: hashes, PromptTokens: 64}, 3, &pk)
			d := pk.Decision.Deployments
			if d[0].HitRatio != 1 || d[1].HitRatio != 0 {
				t.Fatalf("hit ratios %v %v", d[0].HitRatio, d[1].HitRatio)
			}
			if want := 9.0 / (1024 + 9); !near(d[1].Probability, want) {
				t.Fatalf("P_B = %.15g, want %.15g", d[1].Probability, want)
			}
		})
	}
}
