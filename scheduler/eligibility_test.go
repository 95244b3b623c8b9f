package scheduler_test

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/prefixroute/prefixroute/scheduler"
)

func TestEligibility(t *testing.T) {
	all := func(in *scheduler.Instance) {
		in.Disconnected, in.ReportAge, in.Draining, in.Excluded, in.KVUsage, in.QueueMs = true, time.Hour, true, true, 1, 1e6
	}
	tests := []struct {
		name string
		set  func(*scheduler.Policy)
		in   func(*scheduler.Instance)
		want scheduler.Reason
	}{
		{"healthy", nil, func(in *scheduler.Instance) {}, scheduler.ReasonNone},
		{"disconnected", nil, func(in *scheduler.Instance) { in.Disconnected = true }, scheduler.ReasonDisconnected},
		{"stale", nil, func(in *scheduler.Instance) { in.ReportAge = 2*time.Second + 1 }, scheduler.ReasonStale},
		{"age == stale_after is fresh", nil, func(in *scheduler.Instance) { in.ReportAge = 2 * time.Second }, scheduler.ReasonNone},
		{"draining", nil, func(in *scheduler.Instance) { in.Draining = true }, scheduler.ReasonDraining},
		{"excluded by request", nil, func(in *scheduler.Instance) { in.Excluded = true }, scheduler.ReasonExcluded},
		{"kv at max", nil, func(in *scheduler.Instance) { in.KVUsage = 0.95 }, scheduler.ReasonKVFull},
		{"kv just under max", nil, func(in *scheduler.Instance) { in.KVUsage = 0.9499 }, scheduler.ReasonNone},
		{"kv over 1", nil, func(in *scheduler.Instance) { in.KVUsage = 1.5 }, scheduler.ReasonKVFull},
		{"max_kv_usage 1 keeps 0.999", func(p *scheduler.Policy) { p.MaxKVUsage = 1 }, func(in *scheduler.Instance) { in.KVUsage = 0.999 }, scheduler.ReasonNone},
		{"max_kv_usage 1 excludes a full cache", func(p *scheduler.Policy) { p.MaxKVUsage = 1 }, func(in *scheduler.Instance) { in.KVUsage = 1 }, scheduler.ReasonKVFull},
		{"queue over max", func(p *scheduler.Policy) { p.MaxQueueMs = 100 }, func(in *scheduler.Instance) { in.QueueMs = 100.5 }, scheduler.ReasonQueueFull},
		{"queue at max", func(p *scheduler.Policy) { p.MaxQueueMs = 100 }, func(in *scheduler.Instance) { in.QueueMs = 100 }, scheduler.ReasonNone},
		{"assigned tokens count toward the queue", func(p *scheduler.Policy) { p.MaxQueueMs = 100 }, func(in *scheduler.Instance) {
			in.QueueMs, in.AssignedTokens, in.PrefillTokensPerSecond = 90, 20, 1000
		}, scheduler.ReasonQueueFull},
		{"prefill does not count toward the queue", func(p *scheduler.Policy) { p.MaxQueueMs = 100 }, func(in *scheduler.Instance) {
			in.QueueMs, in.PrefillTokensPerSecond = 90, 1 // the prompt costs 1e5 ms of prefill here
		}, scheduler.ReasonNone},
		{"negative zero figures are valid", nil, func(in *scheduler.Instance) {
			in.QueueMs, in.KVUsage, in.PrefillTokensPerSecond = math.Copysign(0, -1), math.Copysign(0, -1), math.Copysign(0, -1)
		}, scheduler.ReasonNone},
		{"max_queue_ms 0 is off", nil, func(in *scheduler.Instance) { in.QueueMs = 1e12 }, scheduler.ReasonNone},
		{"order: disconnected first", func(p *scheduler.Policy) { p.MaxQueueMs = 100 }, all, scheduler.ReasonDisconnected},
		{"order: stale before draining", func(p *scheduler.Policy) { p.MaxQueueMs = 100 }, func(in *scheduler.Instance) { all(in); in.Disconnected = false }, scheduler.ReasonStale},
		{"order: draining before excluded", func(p *scheduler.Policy) { p.MaxQueueMs = 100 }, func(in *scheduler.Instance) {
			all(in)
			in.Disconnected, in.ReportAge = false, 0
		}, scheduler.ReasonDraining},
		{"order: excluded before kv", func(p *scheduler.Policy) { p.MaxQueueMs = 100 }, func(in *scheduler.Instance) {
			all(in)
			in.Disconnected, in.ReportAge, in.Draining = false, 0, false
		}, scheduler.ReasonExcluded},
		{"order: kv before queue", func(p *scheduler.Policy) { p.MaxQueueMs = 100 }, func(in *scheduler.Instance) {
			all(in)
			in.Disconnected, in.ReportAge, in.Draining, in.Excluded = false, 0, false, false
		}, scheduler.ReasonKVFull},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cand := q(0, 10)
			tt.in(&cand)
			snap := &scheduler.Snapshot{Deployments: deps(1), Instances: []scheduler.Instance{cand, q(0, 10)}}
			d := decide(t, policy(tt.set), scheduler.Request{PromptTokens: 100}, snap)
			checkInvariants(t, snap, d, nil, 1e-12)
			r := d.Instances[0]
			if r.Reason != tt.want {
				t.Fatalf("Reason = %q, want %q", r.Reason, tt.want)
			}
			wantCount := 0
			if tt.want != scheduler.ReasonNone {
				wantCount = 1
				if r.Probability != 0 || r.Joint != 0 {
					t.Fatalf("excluded instance has P = %v, Joint = %v", r.Probability, r.Joint)
				}
				if r.CostMs == 0 {
					t.Fatalf("excluded instance has no cost parts: %+v", r)
				}
			}
			if d.Excluded[tt.want] != wantCount && tt.want != scheduler.ReasonNone {
				t.Fatalf("Excluded[%q] = %d, want %d", tt.want, d.Excluded[tt.want], wantCount)
			}
			if d.Deployments[0].Eligible != 2-wantCount {
				t.Fatalf("Eligible = %d", d.Deployments[0].Eligible)
			}
		})
	}
}

func TestNoEligibleInstanceCounts(t *testing.T) {
	stale := func() scheduler.Instance { in := q(0, 1); in.ReportAge = time.Minute; return in }
	drain := q(1, 1)
	drain.Draining = true
	snap := &scheduler.Snapshot{Deployments: deps(1, 1), Instances: []scheduler.Instance{stale(), stale(), drain, stale()}}
	var d scheduler.Decision
	rng := draws(0.5, 0.5)
	err := scheduler.Decide(policy(nil), scheduler.Request{}, snap, rng, &d)
	if !errors.Is(err, scheduler.ErrNoEligibleInstance) {
		t.Fatalf("err = %v, want ErrNoEligibleInstance", err)
	}
	checkInvariants(t, snap, &d, err, 0)
	if got, want := d.ExcludedSummary(), "3 stale, 1 draining"; got != want {
		t.Fatalf("summary = %q, want %q", got, want)
	}
	for k, dr := range d.Deployments {
		if dr.Reason != scheduler.ReasonNoEligibleInstance || dr.Probability != 0 {
			t.Fatalf("deployment %d: %+v", k, dr)
		}
	}
	if rng.calls != 0 {
		t.Fatalf("RNG called %d times on error", rng.calls)
	}
}
