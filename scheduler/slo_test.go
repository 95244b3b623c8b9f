package scheduler_test

import (
	"errors"
	"math"
	"testing"

	"github.com/prefixroute/prefixroute/scheduler"
)

// sloSnap is a one-deployment pool for a request of 640 prompt tokens in 40
// blocks at 10,000 tokens/s and no attention term: "hit" has the prompt
// cached and 90 ms of queue (predicted TTFT 90 ms, cost 90 ms), "cold" has
// nothing cached and no queue (predicted 64 ms, cost 64 ms × the prefill
// weight).
func sloSnap(weights ...float64) *scheduler.Snapshot {
	snap := &scheduler.Snapshot{Deployments: deps(weights...)}
	for k := range weights {
		hot := hit(k, 90, 40)
		hot.ID = string(rune('A'+k)) + "-hit"
		cold := q(k, 0)
		cold.ID = string(rune('A'+k)) + "-cold"
		snap.Instances = append(snap.Instances, hot, cold)
	}
	return snap
}

func sloPolicy(f func(*scheduler.Policy)) *scheduler.Policy {
	return policy(func(p *scheduler.Policy) {
		p.DoublingContextTokens = 0
		if f != nil {
			f(p)
		}
	})
}

// TestSLOInstanceLevel: inside a deployment, instances predicted to miss
// the target lose to those that meet it, and the strategy runs among those.
func TestSLOInstanceLevel(t *testing.T) {
	pHit := 1 / (1 + math.Exp2(-(128.0-90)/20)) // softmax of costs 90 and 128 at delta 20
	tests := []struct {
		name     string
		pol      func(*scheduler.Policy)
		target   float64
		wantProb [2]float64 // hit, cold
		wantWhy  [2]scheduler.Reason
		met      bool
	}{
		{"no target", nil, 0, [2]float64{pHit, 1 - pHit}, [2]scheduler.Reason{}, false},
		{"both meet", nil, 100, [2]float64{pHit, 1 - pHit}, [2]scheduler.Reason{}, true},
		{"target at the hit's TTFT", nil, 90, [2]float64{pHit, 1 - pHit}, [2]scheduler.Reason{}, true},
		{"hit misses", nil, 80, [2]float64{0, 1}, [2]scheduler.Reason{scheduler.ReasonSLOMiss, 0}, true},
		{"none meets, best effort", nil, 50, [2]float64{pHit, 1 - pHit}, [2]scheduler.Reason{}, false},
		{"argmin among those that meet", func(p *scheduler.Policy) { p.Strategy = scheduler.Argmin }, 80,
			[2]float64{0, 1}, [2]scheduler.Reason{scheduler.ReasonSLOMiss, 0}, true},
		{"argmin, both meet", func(p *scheduler.Policy) { p.Strategy = scheduler.Argmin }, 100,
			[2]float64{1, 0}, [2]scheduler.Reason{0, scheduler.ReasonNotMinimum}, true},
		{"threshold band from the least cost that meets", func(p *scheduler.Policy) { p.Strategy = scheduler.Threshold }, 80,
			[2]float64{0, 1}, [2]scheduler.Reason{scheduler.ReasonSLOMiss, 0}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snap := sloSnap(1)
			req := scheduler.Request{PromptTokens: 640, Blocks: 40, PrefillWeight: 2, TTFTTargetMs: tt.target}
			var d scheduler.Decision
			// Draw 0.7 picks the cold instance whenever its P(i|d) > 0.3.
			err := scheduler.Decide(sloPolicy(tt.pol), req, snap, draws(0, 0.7), &d)
			if err != nil {
				t.Fatalf("Decide: %v", err)
			}
			checkInvariants(t, snap, &d, err, 1e-12)
			for i := range 2 {
				near(t, snap.Instances[i].ID+" P(i|d)", d.Instances[i].Probability, tt.wantProb[i], 1e-15)
				if d.Instances[i].Reason != tt.wantWhy[i] {
					t.Errorf("%s reason %v, want %v", snap.Instances[i].ID, d.Instances[i].Reason, tt.wantWhy[i])
				}
			}
			if d.TTFTTargetMs != tt.target || d.SLOMet != tt.met {
				t.Errorf("target %v met %v, want %v %v (chosen %s, predicted %v ms)", d.TTFTTargetMs, d.SLOMet,
					tt.target, tt.met, snap.Instances[d.Instance].ID, d.Instances[d.Instance].PredictedTTFTMs())
			}
		})
	}
}

// TestSLOShed: under on_slo_miss shed, a target no eligible instance of a
// deployment with P(d) > 0 meets refuses the pick without a draw; a target
// another deployment meets does not, even when the drawn one misses it.
func TestSLOShed(t *testing.T) {
	shed := func(p *scheduler.Policy) { p.OnSLOMiss = scheduler.SLOShed }
	tests := []struct {
		name      string
		snap      *scheduler.Snapshot
		target    float64
		draw      float64
		wantErr   error
		wantBest  float64
		wantInst  string
		wantMet   bool
		wantCalls int
	}{
		{"none meets", sloSnap(1), 50, 0, scheduler.ErrSLOUnattainable, 64, "", false, 0},
		{"one meets", sloSnap(1), 70, 0.99, nil, 0, "A-cold", true, 2},
		{"drawn deployment misses, another meets", func() *scheduler.Snapshot {
			s := sloSnap(1, 1)
			s.Instances[2].QueueMs, s.Instances[3].QueueMs = 100, 100 // B: hit 100+0, cold 64+100
			return s
		}(), 80, 0.9, nil, 0, "B-hit", false, 2},
		{"only a weight 0 deployment meets", func() *scheduler.Snapshot {
			s := sloSnap(0, 1)
			s.Instances[2].QueueMs, s.Instances[3].QueueMs = 100, 100
			return s
		}(), 80, 0, scheduler.ErrSLOUnattainable, 100, "", false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := scheduler.Request{PromptTokens: 640, Blocks: 40, TTFTTargetMs: tt.target}
			var d scheduler.Decision
			rng := draws(tt.draw, 0)
			err := scheduler.Decide(sloPolicy(shed), req, tt.snap, rng, &d)
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil) {
				t.Fatalf("Decide: %v, want %v", err, tt.wantErr)
			}
			checkInvariants(t, tt.snap, &d, err, 1e-12)
			if rng.calls != tt.wantCalls {
				t.Errorf("%d draws, want %d", rng.calls, tt.wantCalls)
			}
			if d.SLOBestMs != tt.wantBest {
				t.Errorf("SLOBestMs = %v, want %v", d.SLOBestMs, tt.wantBest)
			}
			if err == nil && (tt.snap.Instances[d.Instance].ID != tt.wantInst || d.SLOMet != tt.wantMet) {
				t.Errorf("chose %s met %v, want %s %v", tt.snap.Instances[d.Instance].ID, d.SLOMet, tt.wantInst, tt.wantMet)
			}
		})
	}
}

// TestSLOTargetInvalid: a target must be 0 or in (0, MaxTTFTTargetMs].
func TestSLOTargetInvalid(t *testing.T) {
	for _, v := range []float64{-1, math.NaN(), math.Inf(1), scheduler.MaxTTFTTargetMs + 1} {
		var d scheduler.Decision
		err := scheduler.Decide(sloPolicy(nil), scheduler.Request{PromptTokens: 640, Blocks: 40, TTFTTargetMs: v}, sloSnap(1), draws(0, 0), &d)
		if !errors.Is(err, scheduler.ErrInvalidSnapshot) {
			t.Errorf("target %v: %v, want ErrInvalidSnapshot", v, err)
		}
	}
	var d scheduler.Decision
	if err := scheduler.Decide(sloPolicy(nil), scheduler.Request{TTFTTargetMs: scheduler.MaxTTFTTargetMs}, sloSnap(1), draws(0, 0), &d); err != nil {
		t.Errorf("target at the limit: %v", err)
	}
}

// TestSLOChosenPath: DecideDeployment + DecideInstance give Decide's
// ChosenOnly result with a target; under shed, a drawn deployment that
// cannot meet it asks for Decide with the deployment draw replayed, which
// then gives exactly the full decision.
func TestSLOChosenPath(t *testing.T) {
	snap := sloSnap(1, 1)
	snap.Instances[2].QueueMs, snap.Instances[3].QueueMs = 100, 100
	for _, tc := range []struct {
		name    string
		pol     *scheduler.Policy
		wantErr error
	}{
		{"best effort", sloPolicy(nil), nil},
		{"shed", sloPolicy(func(p *scheduler.Policy) { p.OnSLOMiss = scheduler.SLOShed }), scheduler.ErrSLODeploymentMiss},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := scheduler.Request{PromptTokens: 640, Blocks: 40, ChosenOnly: true, TTFTTargetMs: 80}
			var full scheduler.Decision
			if err := scheduler.Decide(tc.pol, req, snap, draws(0.9, 0.2), &full); err != nil {
				t.Fatalf("Decide: %v", err)
			}
			sums := []scheduler.Summary{{Eligible: 2, MatchedBlocks: 40}, {Eligible: 2, MatchedBlocks: 40}}
			var excl [scheduler.NumReasons]int
			var d scheduler.Decision
			rng := draws(0.9, 0.2)
			if err := scheduler.DecideDeployment(tc.pol, req, snap.Deployments, sums, &excl, rng, &d); err != nil {
				t.Fatalf("DecideDeployment: %v", err)
			}
			sub := &scheduler.Snapshot{Deployments: snap.Deployments, Instances: snap.Instances[2:]}
			err := scheduler.DecideInstance(tc.pol, req, sub, rng, &d)
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) {
				t.Fatalf("DecideInstance: %v, want %v", err, tc.wantErr)
			}
			if err != nil {
				if rng.calls != 1 {
					t.Fatalf("%d draws before ErrSLODeploymentMiss, want 1", rng.calls)
				}
				var again scheduler.Decision
				if err := scheduler.Decide(tc.pol, req, snap, draws(d.DeploymentDraw, 0.2), &again); err != nil {
					t.Fatalf("Decide replayed: %v", err)
				}
				d = again
				sub = snap
			}
			got, want := sub.Instances[d.Instance].ID, snap.Instances[full.Instance].ID
			if got != want || d.SLOMet != full.SLOMet || d.TTFTTargetMs != 80 {
				t.Errorf("chose %s (met %v), full Decide %s (met %v)", got, d.SLOMet, want, full.SLOMet)
			}
		})
	}
}
