package store

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prefixroute/prefixroute/scheduler"
)

// deployments returns n deployments of weight 1.
func deployments(n int) map[string]float64 {
	w := make(map[string]float64, n)
	for i := range n {
		w[fmt.Sprintf("d%03d", i)] = 1
	}
	return w
}

func TestSetWeightsValidation(t *testing.T) {
	name128, name129 := strings.Repeat("n", 128), strings.Repeat("n", 129)
	tests := []struct {
		name    string
		pool    string
		weights map[string]float64
		wantIs  []error // nil = success
		wantMsg string
	}{
		{"weight 0", "p", map[string]float64{"a": 0, "b": 1}, nil, ""},
		{"all weights 0 (drain)", "p", map[string]float64{"a": 0, "b": 0}, nil, ""},
		{"weight MaxWeight", "p", map[string]float64{"a": 1e6}, nil, ""},
		{"weight just over MaxWeight", "p", map[string]float64{"a": 1, "b": math.Nextafter(1e6, 2e6)},
			[]error{ErrInvalidWeights}, `weight of deployment "b" is 1000000.0000000001; want a finite number in [0, 1000000]`},
		{"weight huge", "p", map[string]float64{"b": 1e300},
			[]error{ErrInvalidWeights}, `weight of deployment "b" is 1e+300; want a finite number in [0, 1000000]`},
		{"weight NaN", "p", map[string]float64{"a": 1, "b": math.NaN()},
			[]error{ErrInvalidWeights}, `weight of deployment "b" is NaN; want a finite number in [0, 1000000]`},
		{"weight -1", "p", map[string]float64{"b": -1},
			[]error{ErrInvalidWeights}, `weight of deployment "b" is -1; want a finite number in [0, 1000000]`},
		{"weight +Inf", "p", map[string]float64{"b": math.Inf(1)},
			[]error{ErrInvalidWeights}, `weight of deployment "b" is +Inf; want`},
		{"weight -Inf", "p", map[string]float64{"b": math.Inf(-1)},
			[]error{ErrInvalidWeights}, `weight of deployment "b" is -Inf; want`},
		{"256 deployments", "p", deployments(256), nil, ""},
		{"257 deployments", "p", deployments(257),
			[]error{ErrInvalidWeights}, "257 deployments; want at most 256"},
		{"no deployments", "p", map[string]float64{},
			[]error{ErrInvalidWeights}, "no deployments; want 1 to 256"},
		{"nil weights", "p", nil, []error{ErrInvalidWeights}, "no deployments"},
		{"deployment name 128 bytes", "p", map[string]float64{name128: 1}, nil, ""},
		{"deployment name 129 bytes", "p", map[string]float64{name129: 1},
			[]error{ErrInvalidWeights, ErrInvalidName}, "is 129 bytes; want at most 128"},
		{"deployment name empty", "p", map[string]float64{"": 1},
			[]error{ErrInvalidWeights, ErrInvalidName}, "deployment name is empty; want 1 to 128 bytes"},
		{"deployment name unprintable", "p", map[string]float64{"a\x00": 1},
			[]error{ErrInvalidWeights, ErrInvalidName}, "unprintable character U+0000 at byte 1"},
		{"deployment name not UTF-8", "p", map[string]float64{"a\xff": 1},
			[]error{ErrInvalidWeights, ErrInvalidName}, "is not valid UTF-8"},
		{"pool name 128 bytes", name128, map[string]float64{"a": 1}, nil, ""},
		{"pool name 129 bytes", name129, map[string]float64{"a": 1},
			[]error{ErrInvalidName}, "pool name \"" + name129 + "\" is 129 bytes; want at most 128"},
		{"pool name empty", "", map[string]float64{"a": 1}, []error{ErrInvalidName}, "pool name is empty"},
		{"pool name with newline", "a\nb", map[string]float64{"a": 1}, []error{ErrInvalidName}, "unprintable character U+000A"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			s := openStore(t, dir, Options{})
			c, err := s.SetWeights(tt.pool, tt.weights, 0, "t")
			if tt.wantIs == nil {
				if err != nil || c.WeightsVersion != 1 {
					t.Fatalf("SetWeights = v%d, %v; want v1, nil", c.WeightsVersion, err)
				}
				return
			}
			if err == nil {
				t.Fatal("SetWeights succeeded; want an error")
			}
			for _, target := range tt.wantIs {
				if !errors.Is(err, target) {
					t.Errorf("error %q does not wrap %v", err, target)
				}
			}
			if !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("error %q does not contain %q", err, tt.wantMsg)
			}
			if len(s.Pools()) != 0 {
				t.Errorf("pools after a refused change: %v", s.Pools())
			}
			if _, err := os.Stat(filepath.Join(dir, stateFileName)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("state file written for a refused change (stat: %v)", err)
			}
		})
	}
}

func TestSetPolicyValidation(t *testing.T) {
	policy := func(edit func(*scheduler.Policy)) scheduler.Policy {
		p := defaultPolicy()
		edit(&p)
		return p
	}
	tests := []struct {
		name    string
		pool    string
		policy  scheduler.Policy
		wantIs  error
		wantMsg string
	}{
		{"pool name empty", "", defaultPolicy(), ErrInvalidName, "pool name is empty"},
		{"NaN parameter", "p", policy(func(p *scheduler.Policy) { p.DeltaMs = math.NaN() }), ErrInvalidPolicy, "delta_ms"},
		{"infinite parameter", "p", policy(func(p *scheduler.Policy) { p.MaxQueueMs = math.Inf(1) }), ErrInvalidPolicy, "max_queue_ms"},
		{"out of range", "p", policy(func(p *scheduler.Policy) { p.LambdaH = 101 }), ErrInvalidPolicy, "lambda_h"},
		{"unknown strategy", "p", policy(func(p *scheduler.Policy) { p.Strategy = 7 }), ErrInvalidPolicy, "strategy"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := openStore(t, t.TempDir(), Options{})
			_, err := s.SetPolicy(tt.pool, tt.policy, "t")
			if !errors.Is(err, tt.wantIs) || !strings.Contains(err.Error(), tt.wantMsg) {
				t.Fatalf("SetPolicy = %v; want %v containing %q", err, tt.wantIs, tt.wantMsg)
			}
			if len(s.Pools()) != 0 {
				t.Errorf("pools after a refused change: %v", s.Pools())
			}
		})
	}
}

// TestEncodePolicyRefusesWhatJSONCannotHold covers the encoder's own checks,
// which Validate normally makes unreachable.
func TestEncodePolicyRefusesWhatJSONCannotHold(t *testing.T) {
	tests := []struct {
		name    string
		edit    func(*scheduler.Policy)
		wantMsg string
	}{
		{"NaN", func(p *scheduler.Policy) { p.ThresholdRatio = math.NaN() }, "threshold_ratio is NaN; want a finite number"},
		{"+Inf", func(p *scheduler.Policy) { p.BatchWaitMs = math.Inf(1) }, "batch_wait_ms is +Inf; want a finite number"},
		{"unknown strategy", func(p *scheduler.Policy) { p.Strategy = 9 }, "unknown strategy 9"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := defaultPolicy()
			tt.edit(&p)
			_, err := encodePolicy(p)
			if !errors.Is(err, ErrInvalidPolicy) || !strings.Contains(err.Error(), tt.wantMsg) {
				t.Fatalf("encodePolicy = %v; want ErrInvalidPolicy containing %q", err, tt.wantMsg)
			}
		})
	}
}
