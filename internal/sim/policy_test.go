package sim

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/scheduler"
)

const policyBase = `
name: p
duration: 1m
block_tokens: 32
deployments: [{name: x, instances: 1, prefill_tokens_per_second: 1000, kv_blocks: 10}]
workload: {rate: 1, classes: [{name: c, share: 1}]}
`

// TestPolicySpec: every scheduler.PolicyFields key is accepted, the
// variant's over the scenario's over the default with the scenario's block
// size; stale_after raises forget_after unless that is set too.
func TestPolicySpec(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		want       func(p *scheduler.Policy)
	}{
		{"none", "variants: [{name: v}]", func(*scheduler.Policy) {}},
		{"every key", `policy: {strategy: threshold, lambda_h: 3, delta_ms: 7, threshold_ratio: 0.2, threshold_min_ms: 11,
  batch_wait_ms: 2, block_size_tokens: 64, default_prefill_tokens_per_second: 1234, max_kv_usage: 0.9, max_queue_ms: 500,
  deployment_delta_ms: 40, stale_after: 3s, forget_after: 1m, default_kv_capacity_blocks: 99, on_saturation: shed,
  doubling_context_tokens: 33000, pd_min_uncached_tokens: 16, pd_transfer_ms_per_token: 0.01, pd_fallback: fail,
  pd_interference_weight: 0.3, short_lanes: 1, short_lane_max_prefill_ms: 300}
variants: [{name: v}]`, func(p *scheduler.Policy) {
			*p = scheduler.Policy{Strategy: scheduler.Threshold, LambdaH: 3, DeltaMs: 7, ThresholdRatio: 0.2, ThresholdMinMs: 11,
				BatchWaitMs: 2, BlockSizeTokens: 64, DefaultPrefillTokensPerSecond: 1234, MaxKVUsage: 0.9, MaxQueueMs: 500,
				DeploymentDeltaMs: 40, StaleAfter: 3 * time.Second, ForgetAfter: time.Minute, DefaultKVCapacityBlocks: 99,
				OnSaturation: scheduler.SaturationShed, DoublingContextTokens: 33000,
				PDMinUncachedTokens: 16, PDTransferMsPerToken: 0.01, PDFallback: scheduler.PDFallbackFail,
				PDInterferenceWeight: 0.3, PDDecodeRunningMs: 5, ShortLanes: 1, ShortLaneMaxPrefillMs: 300,
				QueueTTL: 30 * time.Second, QueueMaxWaiting: 1000, QueueMaxPerBand: 1000} // absent: the defaults
		}},
		{"variant over scenario", "policy: {delta_ms: 7, lambda_h: 3}\nvariants: [{name: v, policy: {delta_ms: 9}}]",
			func(p *scheduler.Policy) { p.DeltaMs, p.LambdaH = 9, 3 }},
		{"stale_after raises forget_after", "variants: [{name: v, policy: {stale_after: 45}}]",
			func(p *scheduler.Policy) { p.StaleAfter, p.ForgetAfter = 45*time.Second, 45*time.Second }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc, err := ParseScenario([]byte(policyBase + tc.yaml))
			if err != nil {
				t.Fatal(err)
			}
			rc, err := sc.resolve(&sc.Variants[0])
			if err != nil {
				t.Fatal(err)
			}
			want := scheduler.DefaultPolicy()
			want.BlockSizeTokens = 32
			tc.want(&want)
			if rc.policy != want {
				t.Fatalf("policy %+v\nwant %+v", rc.policy, want)
			}
		})
	}
}

// TestPolicySpecErrors: unknown keys, repeated keys and values of the
// wrong kind fail with the key's name.
func TestPolicySpecErrors(t *testing.T) {
	for _, tc := range []struct{ name, yaml, want string }{
		{"unknown key", "policy: {lamda_h: 3}", "field lamda_h not found in policy; keys: strategy, lambda_h,"},
		{"twice", "policy: {lambda_h: 3, lambda_h: 4}", "lambda_h given twice"},
		{"not a number", "policy: {lambda_h: lots}", `lambda_h: "lots" is not a number`},
		{"not whole", "policy: {block_size_tokens: 1.5}", `block_size_tokens: "1.5" is not a whole number in [0, 4294967295]`},
		{"bad enum", "policy: {on_saturation: drop}", `on_saturation must be least_loaded, shed or queue, got "drop"`},
		{"bad duration", "policy: {forget_after: soon}", `line 7: forget_after: "soon" is not a duration`},
		{"not a mapping", "policy: [lambda_h]", "policy must be a mapping"},
		{"out of range", "policy: {max_kv_usage: 0}", "max_kv_usage must be in (0, 1], got 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseScenario([]byte(policyBase + tc.yaml))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
}

// TestPolicyProtoSpeed: live mode's policy runs speed times slower: ms
// fields divided, throughputs multiplied, every field sent.
func TestPolicyProtoSpeed(t *testing.T) {
	p := scheduler.DefaultPolicy()
	p.BatchWaitMs, p.MaxQueueMs, p.DeploymentDeltaMs, p.OnSaturation = 4, 200, 40, scheduler.SaturationShed
	got := policyProto(p, 2)
	want := &pb.Policy{Strategy: pb.Strategy_STRATEGY_SOFTMAX, LambdaH: proto.Float64(10), DeltaMs: proto.Float64(10),
		ThresholdRatio: proto.Float64(0.1), ThresholdMinMs: proto.Float64(10), BatchWaitMs: proto.Float64(2),
		BlockSizeTokens: proto.Uint32(16), DefaultPrefillTokensPerSecond: proto.Float64(20000), MaxKvUsage: proto.Float64(0.95),
		MaxQueueMs: proto.Float64(100), DeploymentDeltaMs: proto.Float64(20), StaleAfter: durationpb.New(2 * time.Second),
		ForgetAfter: durationpb.New(30 * time.Second), DefaultKvCapacityBlocks: proto.Uint64(16384),
		OnSaturation: pb.OnSaturation_ON_SATURATION_SHED, DoublingContextTokens: proto.Float64(17000), // tokens: not scaled
		OnSloMiss: pb.SloOnMiss_SLO_ON_MISS_BEST_EFFORT, Calibration: pb.SloCalibration_SLO_CALIBRATION_APPLY,
		PdMinUncachedTokens: proto.Uint32(512), PdTransferMsPerToken: proto.Float64(0.0025), PdFallback: pb.PdFallback_PD_FALLBACK_LOCAL,
		QueueTtl: durationpb.New(30 * time.Second), QueueMaxWaiting: proto.Uint32(1000), QueueMaxPerBand: proto.Uint32(1000), DispatchSpacingMs: proto.Float64(0),
		PdDecodeRunningMs: proto.Float64(2.5), // ms per running request: scaled
		PdMode:            pb.PdMode_PD_MODE_CONDITIONAL,
		ShortLanes:        proto.Uint32(0), ShortLaneMaxPrefillMs: proto.Float64(200), // a prefill's ms: scaled
		PdInterferenceWeight: proto.Float64(0.1)} // ms per ms: not scaled
	if !proto.Equal(got, want) {
		t.Fatalf("policyProto = %v\nwant %v", got, want)
	}
}
