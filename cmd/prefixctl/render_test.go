package main

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/scheduler"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the current output")

// golden compares got with testdata/NAME.golden (rewriting it with
// -update) and checks that every line fits an 80-column terminal.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	for i, line := range strings.Split(strings.TrimRight(string(got), "\n"), "\n") {
		if n := utf8.RuneCountInString(line); n > termWidth {
			t.Errorf("%s line %d is %d columns wide: %q", name, i+1, n, line)
		}
	}
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run 'go test ./cmd/prefixctl -run %s -update' to create it)", err, t.Name())
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from %s (rerun with -update if the change is intended)\ngot:\n%s\nwant:\n%s", name, path, got, want)
	}
}

func f64(v float64) *float64 { return &v }
func u32(v uint32) *uint32   { return &v }
func u64(v uint64) *uint64   { return &v }

// defaultPolicy is the sidecar's default policy, every field set.
func defaultPolicy() *pb.Policy {
	return &pb.Policy{Strategy: pb.Strategy_STRATEGY_SOFTMAX, LambdaH: f64(10), DeltaMs: f64(20), ThresholdRatio: f64(0.1),
		ThresholdMinMs: f64(20), BatchWaitMs: f64(0), BlockSizeTokens: u32(16), DefaultPrefillTokensPerSecond: f64(10000),
		MaxKvUsage: f64(0.95), MaxQueueMs: f64(0), DeploymentDeltaMs: f64(0), StaleAfter: durationpb.New(2e9),
		ForgetAfter: durationpb.New(30e9), DefaultKvCapacityBlocks: u64(16384),
		OnSaturation: pb.OnSaturation_ON_SATURATION_LEAST_LOADED, DoublingContextTokens: f64(17000),
		OnSloMiss: pb.SloOnMiss_SLO_ON_MISS_BEST_EFFORT, Calibration: pb.SloCalibration_SLO_CALIBRATION_APPLY,
		PdMinUncachedTokens: u32(512), PdTransferMsPerToken: f64(0.005), PdFallback: pb.PdFallback_PD_FALLBACK_LOCAL,
		PdInterferenceWeight: f64(0.1),
		PdDecodeRunningMs:    f64(5),
		PdMode:               pb.PdMode_PD_MODE_CONDITIONAL,
		ShortLanes:           u32(0), ShortLaneMaxPrefillMs: f64(400),
		QueueTtl: durationpb.New(30e9), QueueMaxWaiting: u32(1000), QueueMaxPerBand: u32(1000), DispatchSpacingMs: f64(0)}
}

// seedPick is the seed's cutover example: weights 1:9, A holding the whole
// prefix, B cold, three instances.
func seedPick() *pb.PickResponse {
	return &pb.PickResponse{Address: "10.0.0.1:8000", InstanceId: "vllm-a-0", Deployment: "A", Decision: &pb.Decision{
		Strategy: pb.Strategy_STRATEGY_SOFTMAX, Policy: defaultPolicy(), DeploymentDraw: 0.0626, InstanceDraw: 0.4312,
		Seed: 1, WeightsVersion: 3, Blocks: 4, PromptTokens: 64,
		Deployments: []*pb.DeploymentDecision{
			{Deployment: "A", Weight: 1, HitRatio: 1, Probability: 1024.0 / 1033, MatchedBlocks: 4, EligibleInstances: 1},
			{Deployment: "B", Weight: 9, HitRatio: 0, Probability: 9.0 / 1033, EligibleInstances: 2},
		},
		Instances: []*pb.InstanceDecision{
			{InstanceId: "vllm-a-0", Deployment: "A", Address: "10.0.0.1:8000", CostMs: 100, QueueMs: 100, MatchedBlocks: 4,
				Probability: 1, JointProbability: 1024.0 / 1033, PredictedTtftMs: 100, PrefillWeight: 1},
			{InstanceId: "vllm-b-0", Deployment: "B", Address: "10.0.0.2:8000", CostMs: 26.4, PrefillMs: 6.4, QueueMs: 20,
				Probability: 1.0 / 3, JointProbability: 3.0 / 1033, UncachedTokens: 64, PredictedTtftMs: 26.4, PrefillWeight: 1},
			{InstanceId: "vllm-b-1", Deployment: "B", Address: "10.0.0.3:8000", CostMs: 6.4, PrefillMs: 6.4,
				Probability: 2.0 / 3, JointProbability: 6.0 / 1033, UncachedTokens: 64, PredictedTtftMs: 6.4, PrefillWeight: 1},
		},
	}}
}

// busyPick exercises the rest: threshold, the deployment load term, batch
// wait, exclusions, long names that must be truncated, huge costs.
func busyPick() *pb.PickResponse {
	p := defaultPolicy()
	p.Strategy, p.DeploymentDeltaMs, p.BatchWaitMs = pb.Strategy_STRATEGY_THRESHOLD, f64(50), f64(2.5)
	long := "llama-3-70b-instruct-canary-2026-12-01-rollout-b"
	return &pb.PickResponse{Address: "10.1.2.3:8000", InstanceId: "b-7", Deployment: long, Decision: &pb.Decision{
		Strategy: pb.Strategy_STRATEGY_THRESHOLD, Policy: p, DeploymentDraw: 0.5, InstanceDraw: 0.999999, Seed: 18446744073709551615,
		WeightsVersion: 12, Blocks: 8192, PromptTokens: 131072,
		Deployments: []*pb.DeploymentDecision{
			{Deployment: "stable", Weight: 0, Probability: 0, ExcludedReason: "zero_weight", EligibleInstances: 2, LoadMs: 12},
			{Deployment: long, Weight: 1e6, HitRatio: 0.5, Probability: 1, MatchedBlocks: 4096, EligibleInstances: 1, LoadMs: 0.004},
			{Deployment: "shadow", Weight: 0.25, Probability: 0, ExcludedReason: "no_eligible_instance"},
		},
		Instances: []*pb.InstanceDecision{
			// Prefill weight 2: COST = 2 x PREFILL + QUEUE + 2.5 ms.
			{InstanceId: "a-0", Deployment: "stable", CostMs: 2469067, PrefillMs: 1234500, QueueMs: 64.5, BatchWaitMs: 2.5,
				PredictedTtftMs: 1234567, PrefillWeight: 2},
			{InstanceId: "pod-with-a-very-long-generated-name-7f9c8d6b5-x2v4q", Deployment: long, MatchedBlocks: 4096,
				ExcludedReason: "excluded_by_request", CostMs: 16.5, PrefillMs: 7, BatchWaitMs: 2.5, PredictedTtftMs: 9.5, PrefillWeight: 2},
			{InstanceId: "b-7", Deployment: long, MatchedBlocks: 4096, CostMs: 42.255, PrefillMs: 0.005, QueueMs: 39.745,
				BatchWaitMs: 2.5, Probability: 0.5, JointProbability: 0.5, PredictedTtftMs: 42.25, PrefillWeight: 2},
			{InstanceId: "b-8", Deployment: long, MatchedBlocks: 4096, CostMs: 44, QueueMs: 41.5, BatchWaitMs: 2.5,
				Probability: 0.5, JointProbability: 0.5, PredictedTtftMs: 44, PrefillWeight: 2},
			{InstanceId: "b-9", Deployment: long, CostMs: 597.5, PrefillMs: 297.5, BatchWaitMs: 2.5, ExcludedReason: "outside_threshold",
				PredictedTtftMs: 300, PrefillWeight: 2},
			{InstanceId: "s-0", Deployment: "shadow", ExcludedReason: "disconnected", PrefillWeight: 2},
		},
	}}
}

// longRamp is a 20-step ramp from A to B, one step a minute, with applied
// steps done.
func longRamp(st pb.RampState, applied uint32) *pb.Ramp {
	r := &pb.Ramp{Id: 2, State: st, Start: map[string]float64{"A": 1}, StepsApplied: applied,
		StartedAt: timestamppb.New(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)), StartedBy: "alice via token from 10.0.0.9:40112",
		UntilNext: durationpb.New(42 * time.Second), UntilDone: durationpb.New(42*time.Second + time.Duration(19-applied)*time.Minute)}
	for k := 1; k <= 20; k++ {
		f := float64(k) / 20
		r.Steps = append(r.Steps, &pb.RampStep{Weights: map[string]float64{"A": 1 - f, "B": f}, After: durationpb.New(time.Minute)})
	}
	return r
}

// migrationStatus is a cutover from A to B half-way through a ramp: B
// ready (ok) or short of capacity.
func migrationStatus(ok bool) *pb.GetMigrationStatusResponse {
	r := &pb.GetMigrationStatusResponse{Pool: "m", From: "A", To: "B", Window: durationpb.New(5 * time.Minute),
		Covered: durationpb.New(299 * time.Second), Picks: 123456, FromOnlyRequestShare: 0.31, FromOnlyTokenShare: 0.442,
		Deployments: []*pb.DeploymentTraffic{
			{Deployment: "A", Weight: 1, WeightShare: 0.5, Picks: 76543, TrafficShare: 0.62, HitRatio: 0.832,
				PrefillTokensPerSecond: 12345, PrefillMsPerSecond: 617, ThroughputTokensPerSecond: 80000, Instances: 4},
			{Deployment: "B", Weight: 1, WeightShare: 0.5, Picks: 46913, TrafficShare: 0.38, HitRatio: 0.41,
				PrefillTokensPerSecond: 23456, PrefillMsPerSecond: 1172.8, ThroughputTokensPerSecond: 80000, Instances: 4},
		},
		Absorption: &pb.Absorption{ToFraction: 1, MovedPrefillTokensPerSecond: 12345, RecomputeTokens: 3.8e6,
			RecomputeTokensPerSecond: 12709, ExtraTokensPerSecond: 25054, ExtraPrefillMsPerSecond: 1252.7, ThroughputKnown: true,
			ToPrefillMsPerSecond: 1172.8, ToCapacityMsPerSecond: 4000, HeadroomPct: 39.4, CanAbsorb: true},
		HotPrefixes: []*pb.HotPrefix{
			{FirstBlockHash: 0x8c3f0a6e51d2b7c4, DepthFromBlocks: 187, DepthToBlocks: 0, Requests: 4211, ExtraTokens: 2992},
			{FirstBlockHash: 0x01f2e3d4c5b6a798, DepthFromBlocks: 64, DepthToBlocks: 12, Requests: 977, ExtraTokens: 832},
		},
	}
	if !ok {
		a := r.Absorption
		a.ToCapacityMsPerSecond, a.HeadroomPct, a.CanAbsorb = 2000, -21.3, false
		r.Deployments[1].Instances = 2
		r.HotPrefixes = nil
	}
	return r
}

func TestRenderGolden(t *testing.T) {
	instances := &pb.ListInstancesResponse{Instances: []*pb.InstanceStatus{
		{InstanceId: "vllm-a-0", Deployment: "A", Address: "10.0.0.1:8000", State: pb.InstanceState_INSTANCE_STATE_OK,
			ReportAgeMs: 40, QueueMs: f64(100), KvCacheUsage: 0.42, CachedBlocks: 1234, ReportsCacheEvents: true,
			PrefillTokensPerSecond: 12500},
		{InstanceId: "vllm-b-0", Deployment: "B", Address: "10.0.0.2:8000", State: pb.InstanceState_INSTANCE_STATE_STALE,
			ReportAgeMs: 3200, QueuedPrefillTokens: 4096, KvCacheUsage: 0.951, CachedBlocks: 16384,
			PrefillTokensPerSecond: 9000},
		{InstanceId: "vllm-b-2", Deployment: "B", Address: "10.0.0.4:8000", State: pb.InstanceState_INSTANCE_STATE_UNREACHABLE,
			ReportAgeMs: 60, UnreachableBackoffLeftMs: 3200, ReportsCacheEvents: true, PrefillTokensPerSecond: 9000},
		{InstanceId: "vllm-b-1", Deployment: "B", Address: "10.0.0.3:8000", State: pb.InstanceState_INSTANCE_STATE_DISCONNECTED,
			ReportAgeMs: 754000, ReportsCacheEvents: true},
		{InstanceId: "pod-with-a-very-long-generated-name-7f9c8d6b5-x2v4q", Deployment: "canary-2026-12-01",
			Address: "inference-backend-7.cluster.local:8000", State: pb.InstanceState_INSTANCE_STATE_DRAINING,
			ReportAgeMs: 80, KvCacheUsage: 1, ReportsCacheEvents: true, CachedBlocks: 1048576},
	}}
	weights := &pb.GetWeightsResponse{Version: 3, Weights: map[string]float64{"A": 1, "B": 9}, WeightsSet: true,
		Deployments: []*pb.DeploymentWeight{
			{Deployment: "A", Weight: 1, Share: 0.1, Configured: true, Instances: 2},
			{Deployment: "B", Weight: 9, Share: 0.9, Configured: true, Instances: 3},
			{Deployment: "C", Weight: 0, Share: 0, Configured: false, Instances: 1},
		}}
	unset := &pb.GetWeightsResponse{Deployments: []*pb.DeploymentWeight{
		{Deployment: "A", Weight: 1, Share: 0.5, Instances: 1}, {Deployment: "B", Weight: 1, Share: 0.5, Instances: 2}}}
	tuned := defaultPolicy()
	tuned.Strategy, tuned.ThresholdRatio, tuned.MaxQueueMs, tuned.StaleAfter = pb.Strategy_STRATEGY_THRESHOLD, f64(0.25), f64(500),
		durationpb.New(1500e6)
	for _, tc := range []struct {
		name   string
		render func(*bytes.Buffer)
	}{
		{"pools", func(b *bytes.Buffer) {
			renderPools(b, &pb.ListPoolsResponse{Pools: []*pb.PoolSummary{
				{Pool: "llama-3-8b", Deployments: 2, Instances: 5, WeightsVersion: 3}, {Pool: "m", Deployments: 1, Instances: 1}}})
		}},
		{"pools_empty", func(b *bytes.Buffer) { renderPools(b, &pb.ListPoolsResponse{}) }},
		{"instances", func(b *bytes.Buffer) { dp := scheduler.DefaultPolicy(); renderInstances(b, "m", instances, &dp) }},
		{"instances_empty", func(b *bytes.Buffer) { renderInstances(b, "m", &pb.ListInstancesResponse{}, nil) }},
		{"weights_get", func(b *bytes.Buffer) { renderWeights(b, "m", weights) }},
		{"weights_get_unset", func(b *bytes.Buffer) { renderWeights(b, "m", unset) }},
		{"weights_set", func(b *bytes.Buffer) {
			renderWeightsSet(b, "m", &pb.SetWeightsResponse{Version: 4, Weights: map[string]float64{"B": 9, "A": 1, "C": 0}})
		}},
		{"weights_set_drained", func(b *bytes.Buffer) {
			renderWeightsSet(b, "m", &pb.SetWeightsResponse{Version: 5, Weights: map[string]float64{"A": 0}})
		}},
		{"policy_default", func(b *bytes.Buffer) { renderPolicy(b, "m", defaultPolicy(), 0) }},
		{"policy_tuned", func(b *bytes.Buffer) { renderPolicy(b, "m", tuned, 7) }},
		{"pick", func(b *bytes.Buffer) { renderPick(b, seedPick(), false) }},
		{"pick_explain", func(b *bytes.Buffer) { renderPick(b, seedPick(), true) }},
		{"pick_explain_busy", func(b *bytes.Buffer) { renderPick(b, busyPick(), true) }},
		{"pick_explain_slo", func(b *bytes.Buffer) {
			r := seedPick()
			r.Decision.TtftSloMs, r.Decision.SloMet = 250, true
			renderPick(b, r, true)
		}},
		{"pick_explain_lane", func(b *bytes.Buffer) {
			r := seedPick()
			r.Decision.Policy.ShortLanes = u32(1)
			r.Decision.Instances[0].ShortLane = true // takes part: its prefill is short
			in := r.Decision.Instances[1]
			in.ShortLane, in.ExcludedReason, in.Probability, in.JointProbability = true, "short_lane", 0, 0
			r.Decision.Instances[2].Probability, r.Decision.Instances[2].JointProbability = 1, 9.0/1033
			renderPick(b, r, true)
		}},
		{"pick_explain_held", func(b *bytes.Buffer) {
			r := seedPick()
			r.Decision.Policy.DispatchSpacingMs = f64(10)
			r.Decision.DispatchHoldMs = 7.5
			renderPick(b, r, true)
		}},
		{"ramp_running", func(b *bytes.Buffer) { renderRamp(b, "m", longRamp(pb.RampState_RAMP_STATE_RUNNING, 5)) }},
		{"ramp_paused", func(b *bytes.Buffer) {
			r := longRamp(pb.RampState_RAMP_STATE_PAUSED, 2)
			r.Reason = "auto-hold: step 3 would leave B 12.5% prefill headroom (< 20%)"
			r.AutoHold = &pb.AutoHold{MinHeadroomPct: 20, From: "A", To: "B"}
			renderRamp(b, "m", r)
		}},
		{"migration_ready", func(b *bytes.Buffer) { renderMigration(b, migrationStatus(true)) }},
		{"migration_not_yet", func(b *bytes.Buffer) { renderMigration(b, migrationStatus(false)) }},
		{"calibration", func(b *bytes.Buffer) {
			renderCalibration(b, &pb.GetSloCalibrationResponse{Pool: "m", Calibration: pb.SloCalibration_SLO_CALIBRATION_APPLY,
				PriorDoublingContextTokens: 17000, MinSamples: 64, Deployments: []*pb.SloDeploymentCalibration{
					{Deployment: "blue", Version: 12, Accepted: 480, Ignored: 3, Clipped: 9, PrefillScale: 1.31,
						DoublingContextTokens: 12040, QueueScale: 1.02, MeanAbsRelResidual: 0.083, InUse: true},
					{Deployment: "green", Accepted: 20, PrefillScale: 1, DoublingContextTokens: 17000, QueueScale: 1,
						MeanAbsRelResidual: 0.5}}})
		}},
		{"calibration_empty", func(b *bytes.Buffer) {
			renderCalibration(b, &pb.GetSloCalibrationResponse{Pool: "m", Calibration: pb.SloCalibration_SLO_CALIBRATION_OBSERVE,
				PriorDoublingContextTokens: 17000, MinSamples: 64})
		}},
		{"help", func(b *bytes.Buffer) { (&cli{}).printHelp(b, "") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			tc.render(&b)
			golden(t, tc.name, b.Bytes())
		})
	}
}
