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
		BlockSizeTokens: 16, DefaultPrefillTokensPerSecond: 10000, DoublingContextTokens: 17000, MaxKVUsage: 0.95,
		StaleAfter: 2 * time.Second, ForgetAfter: 30 * time.Second, DefaultKVCapacityBlocks: 16384,
		PDMinUncachedTokens: 512, PDTransferMsPerToken: 0.005, PDFallback: scheduler.PDFallbackLocal, PDInterferenceWeight: 0.1, PDDecodeRunningMs: 5,
		ShortLaneMaxPrefillMs: 400, QueueTTL: 30 * time.Second, QueueMaxWaiting: 1000, QueueMaxPerBand: 1000,
	}
	if p != want {
		t.Fatalf("DefaultPolicy() = %+v, want %+v", p, want)
	}
	if err := p.Validate(); err != nil {
		t.Fatalf("DefaultPolicy().Validate() = %v", err)
	}
}

// TestValidateEdges checks every bound of every Policy field just inside
// (accepted) and just outside (refused, with the field, the range and the
// value in the message).
func TestValidateEdges(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	ms := time.Millisecond
	tests := []struct {
		name string
		set  func(*scheduler.Policy)
		want string // "" = accepted
	}{
		{"strategy argmin", func(p *scheduler.Policy) { p.Strategy = scheduler.Argmin }, ""},
		{"strategy unknown", func(p *scheduler.Policy) { p.Strategy = 3 }, "strategy must be softmax, threshold or argmin, got Strategy(3)"},
		{"lambda_h 0", func(p *scheduler.Policy) { p.LambdaH = 0 }, ""},
		{"lambda_h 100", func(p *scheduler.Policy) { p.LambdaH = 100 }, ""},
		{"lambda_h below 0", func(p *scheduler.Policy) { p.LambdaH = -1e-9 }, "lambda_h must be in [0, 100], got -1e-09"},
		{"lambda_h over 100", func(p *scheduler.Policy) { p.LambdaH = 100.5 }, "lambda_h must be in [0, 100], got 100.5"},
		{"lambda_h NaN", func(p *scheduler.Policy) { p.LambdaH = nan }, "lambda_h must be in [0, 100], got NaN"},
		{"delta_ms min", func(p *scheduler.Policy) { p.DeltaMs = 0.001 }, ""},
		{"delta_ms max", func(p *scheduler.Policy) { p.DeltaMs = 1e6 }, ""},
		{"delta_ms 1e-300", func(p *scheduler.Policy) { p.DeltaMs = 1e-300 }, "delta_ms must be in [0.001, 1000000] ms, got 1e-300"},
		{"delta_ms below min", func(p *scheduler.Policy) { p.DeltaMs = 0.000999 }, "delta_ms must be in [0.001, 1000000] ms, got 0.000999"},
		{"delta_ms over max", func(p *scheduler.Policy) { p.DeltaMs = 1000000.5 }, "delta_ms must be in [0.001, 1000000] ms, got 1.0000005e+06"},
		{"delta_ms +Inf", func(p *scheduler.Policy) { p.DeltaMs = inf }, "delta_ms must be in [0.001, 1000000] ms, got +Inf"},
		{"threshold_ratio 0", func(p *scheduler.Policy) { p.ThresholdRatio = 0 }, ""},
		{"threshold_ratio 10", func(p *scheduler.Policy) { p.ThresholdRatio = 10 }, ""},
		{"threshold_ratio negative", func(p *scheduler.Policy) { p.ThresholdRatio = -0.1 }, "threshold_ratio must be in [0, 10], got -0.1"},
		{"threshold_ratio over 10", func(p *scheduler.Policy) { p.ThresholdRatio = 10.01 }, "threshold_ratio must be in [0, 10], got 10.01"},
		{"threshold_min_ms 0", func(p *scheduler.Policy) { p.ThresholdMinMs = 0 }, ""},
		{"threshold_min_ms max", func(p *scheduler.Policy) { p.ThresholdMinMs = 1e6 }, ""},
		{"threshold_min_ms negative", func(p *scheduler.Policy) { p.ThresholdMinMs = -5 }, "threshold_min_ms must be in [0, 1000000] ms, got -5"},
		{"threshold_min_ms over max", func(p *scheduler.Policy) { p.ThresholdMinMs = 1e6 + 1 }, "threshold_min_ms must be in [0, 1000000] ms, got 1000001"},
		{"batch_wait_ms 0", func(p *scheduler.Policy) { p.BatchWaitMs = 0 }, ""},
		{"batch_wait_ms 60000", func(p *scheduler.Policy) { p.BatchWaitMs = 60000 }, ""},
		{"batch_wait_ms negative", func(p *scheduler.Policy) { p.BatchWaitMs = -1 }, "batch_wait_ms must be in [0, 60000] ms, got -1"},
		{"batch_wait_ms 1e300", func(p *scheduler.Policy) { p.BatchWaitMs = 1e300 }, "batch_wait_ms must be in [0, 60000] ms, got 1e+300"},
		{"pd_decode_running_ms 0", func(p *scheduler.Policy) { p.PDDecodeRunningMs = 0 }, ""},
		{"pd_decode_running_ms 1000", func(p *scheduler.Policy) { p.PDDecodeRunningMs = 1000 }, ""},
		{"pd_decode_running_ms negative", func(p *scheduler.Policy) { p.PDDecodeRunningMs = -1e-9 }, "pd_decode_running_ms must be in [0, 1000] ms, got -1e-09"},
		{"pd_decode_running_ms over 1000", func(p *scheduler.Policy) { p.PDDecodeRunningMs = 1000.5 }, "pd_decode_running_ms must be in [0, 1000] ms, got 1000.5"},
		{"pd_decode_running_ms NaN", func(p *scheduler.Policy) { p.PDDecodeRunningMs = nan }, "pd_decode_running_ms must be in [0, 1000] ms, got NaN"},
		{"batch_wait_ms over max", func(p *scheduler.Policy) { p.BatchWaitMs = 60000.001 }, "batch_wait_ms must be in [0, 60000] ms, got 60000.001"},
		{"block_size_tokens 1", func(p *scheduler.Policy) { p.BlockSizeTokens = 1 }, ""},
		{"block_size_tokens max", func(p *scheduler.Policy) { p.BlockSizeTokens = 1 << 20 }, ""},
		{"block_size_tokens 0", func(p *scheduler.Policy) { p.BlockSizeTokens = 0 }, "block_size_tokens must be in [1, 1048576] tokens, got 0"},
		{"block_size_tokens over max", func(p *scheduler.Policy) { p.BlockSizeTokens = 1<<20 + 1 }, "block_size_tokens must be in [1, 1048576] tokens, got 1048577"},
		{"block_size_tokens 1e9", func(p *scheduler.Policy) { p.BlockSizeTokens = 1e9 }, "got 1000000000"},
		{"default tps 1", func(p *scheduler.Policy) { p.DefaultPrefillTokensPerSecond = 1 }, ""},
		{"default tps max", func(p *scheduler.Policy) { p.DefaultPrefillTokensPerSecond = 1e8 }, ""},
		{"default tps below 1", func(p *scheduler.Policy) { p.DefaultPrefillTokensPerSecond = 0.999 }, "default_prefill_tokens_per_second must be in [1, 100000000] tokens/s, got 0.999"},
		{"default tps over max", func(p *scheduler.Policy) { p.DefaultPrefillTokensPerSecond = 1e8 + 1 }, "got 100000001"},
		{"max_kv_usage 1", func(p *scheduler.Policy) { p.MaxKVUsage = 1 }, ""},
		{"max_kv_usage tiny", func(p *scheduler.Policy) { p.MaxKVUsage = 1e-9 }, ""},
		{"max_kv_usage 0", func(p *scheduler.Policy) { p.MaxKVUsage = 0 }, "max_kv_usage must be in (0, 1], got 0"},
		{"max_kv_usage over 1", func(p *scheduler.Policy) { p.MaxKVUsage = 1.01 }, "max_kv_usage must be in (0, 1], got 1.01"},
		{"max_kv_usage NaN", func(p *scheduler.Policy) { p.MaxKVUsage = nan }, "max_kv_usage must be in (0, 1], got NaN"},
		{"max_queue_ms 0", func(p *scheduler.Policy) { p.MaxQueueMs = 0 }, ""},
		{"max_queue_ms max", func(p *scheduler.Policy) { p.MaxQueueMs = 600000 }, ""},
		{"max_queue_ms negative", func(p *scheduler.Policy) { p.MaxQueueMs = -1 }, "max_queue_ms must be in [0, 600000] ms, got -1"},
		{"max_queue_ms over max", func(p *scheduler.Policy) { p.MaxQueueMs = 600001 }, "max_queue_ms must be in [0, 600000] ms, got 600001"},
		{"deployment_delta_ms 0", func(p *scheduler.Policy) { p.DeploymentDeltaMs = 0 }, ""},
		{"deployment_delta_ms min", func(p *scheduler.Policy) { p.DeploymentDeltaMs = 0.001 }, ""},
		{"deployment_delta_ms max", func(p *scheduler.Policy) { p.DeploymentDeltaMs = 1e6 }, ""},
		{"deployment_delta_ms below min", func(p *scheduler.Policy) { p.DeploymentDeltaMs = 0.0009 }, "deployment_delta_ms must be 0 (off) or in [0.001, 1000000] ms, got 0.0009"},
		{"deployment_delta_ms negative", func(p *scheduler.Policy) { p.DeploymentDeltaMs = -20 }, "got -20"},
		{"deployment_delta_ms over max", func(p *scheduler.Policy) { p.DeploymentDeltaMs = 2e6 }, "got 2000000"},
		{"stale_after min", func(p *scheduler.Policy) { p.StaleAfter = 10 * ms }, ""},
		{"stale_after max", func(p *scheduler.Policy) { p.StaleAfter, p.ForgetAfter = time.Hour, time.Hour }, ""},
		{"stale_after below min", func(p *scheduler.Policy) { p.StaleAfter = 10*ms - 1 }, "stale_after must be in [10ms, 1h0m0s], got 9.999999ms"},
		{"stale_after 0", func(p *scheduler.Policy) { p.StaleAfter = 0 }, "stale_after must be in [10ms, 1h0m0s], got 0s"},
		{"stale_after 100h", func(p *scheduler.Policy) { p.StaleAfter, p.ForgetAfter = 100*time.Hour, 100*time.Hour },
			"stale_after must be in [10ms, 1h0m0s], got 100h0m0s; forget_after must be in [stale_after, 24h0m0s], got 100h0m0s"},
		{"forget_after == stale_after", func(p *scheduler.Policy) { p.ForgetAfter = p.StaleAfter }, ""},
		{"forget_after max", func(p *scheduler.Policy) { p.ForgetAfter = 24 * time.Hour }, ""},
		{"forget_after below stale_after", func(p *scheduler.Policy) { p.ForgetAfter = 2*time.Second - 1 }, "forget_after must be >= stale_after (2s), got 1.999999999s"},
		{"forget_after over max", func(p *scheduler.Policy) { p.ForgetAfter = 24*time.Hour + 1 }, "forget_after must be in [stale_after, 24h0m0s], got 24h0m0.000000001s"},
		{"kv capacity 1", func(p *scheduler.Policy) { p.DefaultKVCapacityBlocks = 1 }, ""},
		{"kv capacity max", func(p *scheduler.Policy) { p.DefaultKVCapacityBlocks = 1 << 30 }, ""},
		{"kv capacity 0", func(p *scheduler.Policy) { p.DefaultKVCapacityBlocks = 0 }, "default_kv_capacity_blocks must be in [1, 1073741824] blocks, got 0"},
		{"kv capacity over max", func(p *scheduler.Policy) { p.DefaultKVCapacityBlocks = 1<<30 + 1 }, "got 1073741825"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := policy(tt.set).Validate()
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, scheduler.ErrInvalidPolicy) {
				t.Fatalf("Validate() = %v, want ErrInvalidPolicy", err)
			}
			if !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "scheduler:") {
				t.Fatalf("Validate() = %q, want it to contain %q and no package prefix", err, tt.want)
			}
		})
	}
}

// TestValidateAllProblems: every bad field is in the one message, in field
// order.
func TestValidateAllProblems(t *testing.T) {
	p := policy(func(p *scheduler.Policy) {
		p.DeltaMs, p.BatchWaitMs, p.BlockSizeTokens, p.DefaultKVCapacityBlocks = 1e-300, 1e300, 1e9, 0
	})
	err := p.Validate()
	want := "invalid policy: delta_ms must be in [0.001, 1000000] ms, got 1e-300; " +
		"batch_wait_ms must be in [0, 60000] ms, got 1e+300; " +
		"block_size_tokens must be in [1, 1048576] tokens, got 1000000000; " +
		"default_kv_capacity_blocks must be in [1, 1073741824] blocks, got 0"
	if err == nil || err.Error() != want {
		t.Fatalf("Validate() = %v\nwant %s", err, want)
	}
	var pe *scheduler.PolicyError
	if !errors.As(err, &pe) || len(pe.Problems) != 4 {
		t.Fatalf("Validate() = %#v, want a *PolicyError with 4 problems", err)
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
