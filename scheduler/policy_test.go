package scheduler_test

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/prefixroute/prefixroute/scheduler"
)

func TestDefaultPolicy(t *testing.T) {
	p := scheduler.DefaultPolicy()
	want := scheduler.Policy{
		Strategy: scheduler.Softmax, LambdaH: 10, DeltaMs: 20, ThresholdRatio: 0.1, ThresholdMinMs: 20,
		BlockSizeTokens: 16, DefaultPrefillTokensPerSecond: 10000, MaxKVUsage: 0.95,
		StaleAfter: 2 * time.Second, ForgetAfter: 30 * time.Second, DefaultKVCapacityBlocks: 16384,
	}
	if p != want {
		t.Fatalf("DefaultPolicy() = %+v, want %+v", p, want)
	}
	if err := p.Validate(); err != nil {
		t.Fatalf("DefaultPolicy().Validate() = %v", err)
	}
}

func TestValidateRejects(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	tests := []struct {
		name string
		set  func(*scheduler.Policy)
		want string
	}{
		{"unknown strategy", func(p *scheduler.Policy) { p.Strategy = 7 }, "strategy must be softmax, threshold or argmin, got Strategy(7)"},
		{"lambda_h negative", func(p *scheduler.Policy) { p.LambdaH = -1 }, "lambda_h must be in [0, 100], got -1"},
		{"lambda_h over 100", func(p *scheduler.Policy) { p.LambdaH = 100.5 }, "lambda_h must be in [0, 100], got 100.5"},
		{"lambda_h NaN", func(p *scheduler.Policy) { p.LambdaH = nan }, "lambda_h must be finite, got NaN"},
		{"delta_ms negative", func(p *scheduler.Policy) { p.DeltaMs = -1 }, "delta_ms must be > 0, got -1"},
		{"delta_ms zero", func(p *scheduler.Policy) { p.DeltaMs = 0 }, "delta_ms must be > 0, got 0"},
		{"delta_ms +Inf", func(p *scheduler.Policy) { p.DeltaMs = inf }, "delta_ms must be finite, got +Inf"},
		{"delta_ms NaN", func(p *scheduler.Policy) { p.DeltaMs = nan }, "delta_ms must be finite, got NaN"},
		{"threshold_ratio negative", func(p *scheduler.Policy) { p.ThresholdRatio = -0.1 }, "threshold_ratio must be >= 0, got -0.1"},
		{"threshold_ratio -Inf", func(p *scheduler.Policy) { p.ThresholdRatio = -inf }, "threshold_ratio must be finite, got -Inf"},
		{"threshold_min_ms negative", func(p *scheduler.Policy) { p.ThresholdMinMs = -5 }, "threshold_min_ms must be >= 0, got -5"},
		{"threshold_min_ms NaN", func(p *scheduler.Policy) { p.ThresholdMinMs = nan }, "threshold_min_ms must be finite"},
		{"batch_wait_ms negative", func(p *scheduler.Policy) { p.BatchWaitMs = -1 }, "batch_wait_ms must be >= 0, got -1"},
		{"batch_wait_ms Inf", func(p *scheduler.Policy) { p.BatchWaitMs = inf }, "batch_wait_ms must be finite"},
		{"block_size_tokens zero", func(p *scheduler.Policy) { p.BlockSizeTokens = 0 }, "block_size_tokens must be > 0, got 0"},
		{"default tps zero", func(p *scheduler.Policy) { p.DefaultPrefillTokensPerSecond = 0 }, "default_prefill_tokens_per_second must be > 0, got 0"},
		{"default tps negative", func(p *scheduler.Policy) { p.DefaultPrefillTokensPerSecond = -3 }, "default_prefill_tokens_per_second must be > 0, got -3"},
		{"default tps Inf", func(p *scheduler.Policy) { p.DefaultPrefillTokensPerSecond = inf }, "default_prefill_tokens_per_second must be finite"},
		{"max_kv_usage zero", func(p *scheduler.Policy) { p.MaxKVUsage = 0 }, "max_kv_usage must be in (0, 1], got 0"},
		{"max_kv_usage over 1", func(p *scheduler.Policy) { p.MaxKVUsage = 1.01 }, "max_kv_usage must be in (0, 1], got 1.01"},
		{"max_kv_usage NaN", func(p *scheduler.Policy) { p.MaxKVUsage = nan }, "max_kv_usage must be in (0, 1], got NaN"},
		{"max_queue_ms negative", func(p *scheduler.Policy) { p.MaxQueueMs = -1 }, "max_queue_ms must be >= 0, got -1"},
		{"max_queue_ms Inf", func(p *scheduler.Policy) { p.MaxQueueMs = inf }, "max_queue_ms must be finite"},
		{"deployment_delta_ms negative", func(p *scheduler.Policy) { p.DeploymentDeltaMs = -20 }, "deployment_delta_ms must be >= 0, got -20"},
		{"deployment_delta_ms NaN", func(p *scheduler.Policy) { p.DeploymentDeltaMs = nan }, "deployment_delta_ms must be finite"},
		{"stale_after zero", func(p *scheduler.Policy) { p.StaleAfter = 0 }, "stale_after must be > 0, got 0s"},
		{"stale_after negative", func(p *scheduler.Policy) { p.StaleAfter = -time.Second }, "stale_after must be > 0, got -1s"},
		{"forget_after below stale_after", func(p *scheduler.Policy) { p.ForgetAfter = time.Second }, "forget_after must be >= stale_after (2s), got 1s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := policy(tt.set).Validate()
			if !errors.Is(err, scheduler.ErrInvalidPolicy) {
				t.Fatalf("Validate() = %v, want ErrInvalidPolicy", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Validate() = %q, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestValidateAccepts(t *testing.T) {
	tests := []struct {
		name string
		set  func(*scheduler.Policy)
	}{
		{"lambda_h 0", func(p *scheduler.Policy) { p.LambdaH = 0 }},
		{"lambda_h 100", func(p *scheduler.Policy) { p.LambdaH = 100 }},
		{"tiny delta_ms", func(p *scheduler.Policy) { p.DeltaMs = 1e-300 }},
		{"max_kv_usage 1", func(p *scheduler.Policy) { p.MaxKVUsage = 1 }},
		{"forget_after == stale_after", func(p *scheduler.Policy) { p.ForgetAfter = p.StaleAfter }},
		{"threshold", func(p *scheduler.Policy) { p.Strategy = scheduler.Threshold; p.ThresholdRatio, p.ThresholdMinMs = 0, 0 }},
		{"argmin with load term", func(p *scheduler.Policy) { p.Strategy = scheduler.Argmin; p.DeploymentDeltaMs = 50 }},
		{"kv capacity 0", func(p *scheduler.Policy) { p.DefaultKVCapacityBlocks = 0 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := policy(tt.set).Validate(); err != nil {
				t.Fatalf("Validate() = %v", err)
			}
		})
	}
}

func TestValidateNil(t *testing.T) {
	var p *scheduler.Policy
	if err := p.Validate(); !errors.Is(err, scheduler.ErrInvalidPolicy) {
		t.Fatalf("nil.Validate() = %v", err)
	}
}

func TestValidateDoesNotAllocate(t *testing.T) {
	p := scheduler.DefaultPolicy()
	if n := testing.AllocsPerRun(100, func() { _ = p.Validate() }); n != 0 {
		t.Fatalf("Validate allocates %v times", n)
	}
}

func TestStrategyString(t *testing.T) {
	tests := []struct {
		s    scheduler.Strategy
		want string
	}{
		{scheduler.Softmax, "softmax"},
		{scheduler.Threshold, "threshold"},
		{scheduler.Argmin, "argmin"},
		{9, "Strategy(9)"},
	}
	for _, tt := range tests {
		if got := tt.s.String(); got != tt.want {
			t.Errorf("%d.String() = %q, want %q", tt.s, got, tt.want)
		}
	}
}

func TestParseStrategy(t *testing.T) {
	tests := []struct {
		in      string
		want    scheduler.Strategy
		wantErr bool
	}{
		{"softmax", scheduler.Softmax, false},
		{"threshold", scheduler.Threshold, false},
		{"argmin", scheduler.Argmin, false},
		{" ArgMin ", scheduler.Argmin, false},
		{"SOFTMAX", scheduler.Softmax, false},
		{"", 0, true},
		{"random", 0, true},
		{"Strategy(1)", 0, true},
	}
	for _, tt := range tests {
		got, err := scheduler.ParseStrategy(tt.in)
		if tt.wantErr {
			if !errors.Is(err, scheduler.ErrInvalidPolicy) || !strings.Contains(err.Error(), "strategy") {
				t.Errorf("ParseStrategy(%q) error = %v, want an ErrInvalidPolicy naming strategy", tt.in, err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ParseStrategy(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
		if back, _ := scheduler.ParseStrategy(got.String()); back != got {
			t.Errorf("round trip of %v gave %v", got, back)
		}
	}
}
