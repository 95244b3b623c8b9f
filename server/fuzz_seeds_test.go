package server

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
)

// fuzzSeeds are the seed inputs of each fuzz target, by file name: valid
// requests, each limit's edge, and the invalid values the handlers must
// refuse. Each Fuzz target adds its own with addSeeds; testdata/fuzz holds
// only inputs the fuzzers found.
func fuzzSeeds() map[string]map[string][][]byte {
	enc := func(ms ...proto.Message) [][]byte {
		out := make([][]byte, len(ms))
		for i, m := range ms {
			// Marshal refuses a string that is not UTF-8 after writing the
			// bytes before it: those bytes are the invalid request wanted
			// ("invalid utf"), so they are kept.
			out[i], _ = proto.MarshalOptions{Deterministic: true}.Marshal(m)
		}
		return out
	}
	seed := uint64(7)
	rep := func(seq uint64, r *pb.ReportLoadRequest) *pb.ReportLoadRequest { r.Seq = seq; return r }
	first := &pb.ReportLoadRequest{Pool: "chat", Deployment: "a", InstanceId: "a-9", Address: "a-9:8000",
		PrefillTokensPerSecond: 8000, KvCapacityBlocks: 8, ReportsCacheEvents: true, StoredBlockHashes: []uint64{1, 2, 3}}
	return map[string]map[string][][]byte{
		"FuzzPick": {
			"hit":       enc(&pb.PickRequest{Pool: "chat", PrefixHashes: []uint64{1, 2, 3, 4, 5}, PromptTokens: 96, Seed: &seed}),
			"cold":      enc(&pb.PickRequest{Pool: "chat", PrefixHashes: []uint64{99}, PromptTokens: 4096, Audit: pb.AuditLevel_AUDIT_LEVEL_CHOSEN}),
			"exclude":   enc(&pb.PickRequest{Pool: "chat", ExcludeInstances: []string{"a-1", "a-2"}, Audit: pb.AuditLevel_AUDIT_LEVEL_NONE}),
			"snapshot":  enc(&pb.PickRequest{Pool: "chat", LoadSnapshot: &pb.LoadSnapshot{Instances: []*pb.InstanceLoad{{InstanceId: "b-1", QueueMs: proto.Float64(1e9), KvCacheUsage: proto.Float64(2)}}}}),
			"no pool":   enc(&pb.PickRequest{Pool: "nope"}),
			"empty":     enc(&pb.PickRequest{}),
			"max token": enc(&pb.PickRequest{Pool: "chat", PromptTokens: ^uint32(0), PrefixHashes: []uint64{1, 2}}),
		},
		"FuzzReportLoad": {
			"events": enc(first, rep(2, &pb.ReportLoadRequest{RemovedBlockHashes: []uint64{1}, StoredBlockHashes: []uint64{4, 5, 6, 7, 8, 9, 10}}),
				rep(3, &pb.ReportLoadRequest{CacheCleared: true, StoredBlockHashes: []uint64{11}})),
			"replace existing": enc(&pb.ReportLoadRequest{Pool: "chat", Deployment: "b", InstanceId: "a-1", Address: "x:1", Seq: 1},
				rep(2, &pb.ReportLoadRequest{QueueMs: proto.Float64(5)}), rep(3, &pb.ReportLoadRequest{Draining: true})),
			"rename": enc(first, rep(2, &pb.ReportLoadRequest{InstanceId: "other"}), rep(3, &pb.ReportLoadRequest{})),
			"bad figures": enc(first, rep(2, &pb.ReportLoadRequest{KvCacheUsage: 1.5}),
				rep(3, &pb.ReportLoadRequest{PrefillTokensPerSecond: -1})),
			"no identity": enc(&pb.ReportLoadRequest{Seq: 1}, &pb.ReportLoadRequest{}, &pb.ReportLoadRequest{}),
			"mode switch": enc(rep(1, &pb.ReportLoadRequest{Pool: "chat", Deployment: "a", InstanceId: "a-2", Address: "a-2:1", StoredBlockHashes: []uint64{5}}),
				rep(2, &pb.ReportLoadRequest{ReportsCacheEvents: true, StoredBlockHashes: []uint64{6, 7}, KvCapacityBlocks: 1}),
				rep(3, &pb.ReportLoadRequest{ReportsCacheEvents: false})),
		},
		"FuzzReportLoadBatch": {
			"two instances": enc(&pb.ReportLoadBatchRequest{Reports: []*pb.ReportLoadRequest{first,
				{Pool: "chat", Deployment: "b", InstanceId: "b-9", Address: "b-9:8000", Seq: 1}}, AckIntervalMs: 1000},
				&pb.ReportLoadBatchRequest{Reports: []*pb.ReportLoadRequest{rep(2, &pb.ReportLoadRequest{Pool: "chat", InstanceId: "a-9",
					RemovedBlockHashes: []uint64{1}, StoredBlockHashes: []uint64{4, 5}})}},
				&pb.ReportLoadBatchRequest{Closed: []*pb.InstanceRef{{Pool: "chat", InstanceId: "a-9"}},
					Reports: []*pb.ReportLoadRequest{rep(2, &pb.ReportLoadRequest{Pool: "chat", InstanceId: "b-9"})}}),
			"bad seq and reopen": enc(&pb.ReportLoadBatchRequest{Reports: []*pb.ReportLoadRequest{rep(5, proto.CloneOf(first))}},
				&pb.ReportLoadBatchRequest{Reports: []*pb.ReportLoadRequest{rep(4, &pb.ReportLoadRequest{Pool: "chat", InstanceId: "a-9"})}},
				&pb.ReportLoadBatchRequest{Reports: []*pb.ReportLoadRequest{rep(1, proto.CloneOf(first))}}),
			"replace existing": enc(&pb.ReportLoadBatchRequest{Reports: []*pb.ReportLoadRequest{
				{Pool: "chat", Deployment: "b", InstanceId: "a-1", Address: "x:1", Seq: 1}, {Pool: "chat", InstanceId: "a-1", Seq: 2, Draining: true}}},
				&pb.ReportLoadBatchRequest{}, &pb.ReportLoadBatchRequest{Reports: []*pb.ReportLoadRequest{{InstanceId: "no-pool"}}}),
			"ack interval": enc(&pb.ReportLoadBatchRequest{AckIntervalMs: 60001}, &pb.ReportLoadBatchRequest{}, &pb.ReportLoadBatchRequest{}),
		},
		"FuzzSetWeights": {
			"canary":      enc(&pb.SetWeightsRequest{AllowNewPool: true, Pool: "chat", Weights: map[string]float64{"a": 9, "b": 1}}),
			"cas ok":      enc(&pb.SetWeightsRequest{AllowNewPool: true, Pool: "chat", Weights: map[string]float64{"b": 1}, ExpectedVersion: 1}),
			"cas stale":   enc(&pb.SetWeightsRequest{AllowNewPool: true, Pool: "chat", Weights: map[string]float64{"b": 1}, ExpectedVersion: 7}),
			"drain":       enc(&pb.SetWeightsRequest{AllowNewPool: true, Pool: "chat", Weights: map[string]float64{"a": 0, "b": 0}}),
			"new pool":    enc(&pb.SetWeightsRequest{AllowNewPool: true, Pool: "embed", Weights: map[string]float64{"v1": 1e6}}),
			"over max":    enc(&pb.SetWeightsRequest{AllowNewPool: true, Pool: "chat", Weights: map[string]float64{"a": 1e6 + 1}}),
			"negative":    enc(&pb.SetWeightsRequest{AllowNewPool: true, Pool: "chat", Weights: map[string]float64{"a": -1}}),
			"empty":       enc(&pb.SetWeightsRequest{AllowNewPool: true, Pool: "chat"}),
			"bad name":    enc(&pb.SetWeightsRequest{AllowNewPool: true, Pool: "chat", Weights: map[string]float64{"a\x00": 1}}),
			"no pool":     enc(&pb.SetWeightsRequest{Weights: map[string]float64{"a": 1}}),
			"long pool":   enc(&pb.SetWeightsRequest{AllowNewPool: true, Pool: strings.Repeat("p", 129), Weights: map[string]float64{"a": 1}}),
			"empty dep":   enc(&pb.SetWeightsRequest{AllowNewPool: true, Pool: "chat", Weights: map[string]float64{"": 1}}),
			"invalid utf": enc(&pb.SetWeightsRequest{AllowNewPool: true, Pool: "ch\xffat", Weights: map[string]float64{"a": 1}}),
		},
		"FuzzSetPolicy": {
			"threshold": enc(&pb.SetPolicyRequest{AllowNewPool: true, Pool: "chat", Policy: &pb.Policy{Strategy: pb.Strategy_STRATEGY_THRESHOLD,
				ThresholdRatio: proto.Float64(0.2), ThresholdMinMs: proto.Float64(5)}}),
			"durations":    enc(&pb.SetPolicyRequest{AllowNewPool: true, Pool: "chat", Policy: &pb.Policy{StaleAfter: durationpb.New(5e9), ForgetAfter: durationpb.New(60e9)}}),
			"bad duration": enc(&pb.SetPolicyRequest{AllowNewPool: true, Pool: "chat", Policy: &pb.Policy{StaleAfter: &durationpb.Duration{Seconds: -1, Nanos: 5}}}),
			"lambda":       enc(&pb.SetPolicyRequest{AllowNewPool: true, Pool: "new", Policy: &pb.Policy{LambdaH: proto.Float64(0), DeltaMs: proto.Float64(1e-9)}}),
			"bad strategy": enc(&pb.SetPolicyRequest{AllowNewPool: true, Pool: "chat", Policy: &pb.Policy{Strategy: 99}}),
			"nan":          enc(&pb.SetPolicyRequest{AllowNewPool: true, Pool: "chat", Policy: &pb.Policy{MaxKvUsage: proto.Float64(2), BatchWaitMs: proto.Float64(-1)}}),
			"no policy":    enc(&pb.SetPolicyRequest{AllowNewPool: true, Pool: "chat"}),
			"capacity":     enc(&pb.SetPolicyRequest{AllowNewPool: true, Pool: "chat", Policy: &pb.Policy{DefaultKvCapacityBlocks: proto.Uint64(1 << 40), BlockSizeTokens: proto.Uint32(0)}}),
		},
	}
}

// addSeeds adds the seeds of target (fuzzSeeds) to f's corpus, in name
// order; a target without seeds, or a seed whose message count is not the
// target's argument count, fails the fuzz test.
func addSeeds(f *testing.F, target string) {
	seeds := fuzzSeeds()[target]
	if len(seeds) == 0 {
		f.Fatalf("fuzzSeeds has no seeds for %s", target)
	}
	for _, name := range slices.Sorted(maps.Keys(seeds)) {
		args := make([]any, len(seeds[name]))
		for i, a := range seeds[name] {
			args[i] = a
		}
		f.Add(args...)
	}
}
