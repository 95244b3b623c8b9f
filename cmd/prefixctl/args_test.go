package main

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
)

func TestParseTokens(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    []uint32
		wantErr bool
	}{
		{"", nil, false},
		{"1,2,3", []uint32{1, 2, 3}, false},
		{"0-3, 9", []uint32{0, 1, 2, 3, 9}, false},
		{"7-7", []uint32{7}, false},
		{"0x10", []uint32{16}, false},
		{"4294967295", []uint32{4294967295}, false},
		{"4294967296", nil, true},
		{"3-1", nil, true},
		{"a", nil, true},
		{"1-", nil, true},
		{"0-4294967295", nil, true}, // over maxTokens
	} {
		got, err := parseTokens(tc.in)
		if (err != nil) != tc.wantErr || !slices.Equal(got, tc.want) {
			t.Errorf("parseTokens(%q) = %v, %v; want %v (error %v)", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
}

func TestParseHashes(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    []uint64
		wantErr bool
	}{
		{"", nil, false},
		{"1,0x10", []uint64{1, 16}, false},
		{"0xeb45f3aedb78df9b,0xffffffffffffffff", []uint64{0xeb45f3aedb78df9b, 1<<64 - 1}, false},
		{"0x1ffffffffffffffff", nil, true},
		{"-1", nil, true},
		{"x", nil, true},
	} {
		got, err := parseHashes(tc.in)
		if (err != nil) != tc.wantErr || !slices.Equal(got, tc.want) {
			t.Errorf("parseHashes(%q) = %v, %v; want %v (error %v)", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
	// The hash command's output parses back.
	hs := []uint64{0, 1, 0xeb45f3aedb78df9b}
	var out []string
	for _, h := range hs {
		out = append(out, fmtHash(h))
	}
	if got, err := parseHashes(strings.Join(out, ",")); err != nil || !slices.Equal(got, hs) {
		t.Errorf("round trip of %v: %v, %v", out, got, err)
	}
}

func TestParseWeights(t *testing.T) {
	for _, tc := range []struct {
		in      []string
		want    map[string]float64
		wantErr string
	}{
		{[]string{"A=1", "B=9"}, map[string]float64{"A": 1, "B": 9}, ""},
		{[]string{"A=0"}, map[string]float64{"A": 0}, ""},
		{[]string{"A=0.25", "canary-2=1e3"}, map[string]float64{"A": 0.25, "canary-2": 1000}, ""},
		{nil, nil, "no weights"},
		{[]string{"A"}, nil, "DEPLOYMENT=WEIGHT"},
		{[]string{"=1"}, nil, "DEPLOYMENT=WEIGHT"},
		{[]string{"A=x"}, nil, "not a finite number"},
		{[]string{"A=-1"}, nil, "not a finite number"},
		{[]string{"A=NaN"}, nil, "not a finite number"},
		{[]string{"A=Inf"}, nil, "not a finite number"},
		{[]string{"A=1", "A=2"}, nil, "twice"},
	} {
		got, err := parseWeights(tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("parseWeights(%q) error %v, want one mentioning %q", tc.in, err, tc.wantErr)
			}
			continue
		}
		if err != nil || !maps.Equal(got, tc.want) {
			t.Errorf("parseWeights(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

func TestParsePolicy(t *testing.T) {
	for _, tc := range []struct {
		in      []string
		want    *pb.Policy
		wantErr string
	}{
		{[]string{"strategy=threshold"}, &pb.Policy{Strategy: pb.Strategy_STRATEGY_THRESHOLD}, ""},
		{[]string{"strategy=STRATEGY_ARGMIN"}, &pb.Policy{Strategy: pb.Strategy_STRATEGY_ARGMIN}, ""},
		{[]string{"strategy=Softmax"}, &pb.Policy{Strategy: pb.Strategy_STRATEGY_SOFTMAX}, ""},
		{[]string{"lambda_h=5", "delta_ms=10ms"}, &pb.Policy{LambdaH: f64(5), DeltaMs: f64(10)}, ""},
		{[]string{"threshold_ratio=10%", "max_kv_usage=0.9"}, &pb.Policy{ThresholdRatio: f64(0.1), MaxKvUsage: f64(0.9)}, ""},
		{[]string{"batch_wait_ms=0"}, &pb.Policy{BatchWaitMs: f64(0)}, ""},
		{[]string{"block_size_tokens=32", "default_kv_capacity_blocks=100000"},
			&pb.Policy{BlockSizeTokens: u32(32), DefaultKvCapacityBlocks: u64(100000)}, ""},
		{[]string{"default_prefill_tokens_per_second=8000tok/s"}, &pb.Policy{DefaultPrefillTokensPerSecond: f64(8000)}, ""},
		{[]string{"stale_after=500ms", "forget_after=1m"},
			&pb.Policy{StaleAfter: durationpb.New(500 * time.Millisecond), ForgetAfter: durationpb.New(time.Minute)}, ""},
		{[]string{"max_queue_ms=250", "deployment_delta_ms=50", "threshold_min_ms=5"},
			&pb.Policy{MaxQueueMs: f64(250), DeploymentDeltaMs: f64(50), ThresholdMinMs: f64(5)}, ""},
		{[]string{"on_saturation=shed"}, &pb.Policy{OnSaturation: pb.OnSaturation_ON_SATURATION_SHED}, ""},
		{[]string{"on_saturation=LEAST_LOADED"}, &pb.Policy{OnSaturation: pb.OnSaturation_ON_SATURATION_LEAST_LOADED}, ""},
		{[]string{"on_saturation=drop"}, nil, "least_loaded, shed or queue"},
		{nil, nil, "no KEY=VALUE"},
		{[]string{"delta"}, nil, "KEY=VALUE"},
		{[]string{"delta=20"}, nil, "unknown policy key"},
		{[]string{"strategy=fastest"}, nil, "softmax, threshold or argmin"},
		{[]string{"strategy=unspecified"}, nil, "softmax, threshold or argmin"},
		{[]string{"lambda_h=ten"}, nil, "finite number"},
		{[]string{"lambda_h=NaN"}, nil, "finite number"},
		{[]string{"block_size_tokens=-1"}, nil, "whole number"},
		{[]string{"block_size_tokens=4294967296"}, nil, "whole number"},
		{[]string{"stale_after=2"}, nil, "duration"},
		{[]string{"lambda_h=1", "lambda_h=2"}, nil, "twice"},
	} {
		got, err := parsePolicy(tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("parsePolicy(%q) error %v, want one mentioning %q", tc.in, err, tc.wantErr)
			}
			continue
		}
		if err != nil || !proto.Equal(got, tc.want) {
			t.Errorf("parsePolicy(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

// TestPolicyKeysCoverProto: the CLI knows every Policy field, in proto
// order, so a field added to the proto fails here until the CLI knows it.
func TestPolicyKeysCoverProto(t *testing.T) {
	fields := (&pb.Policy{}).ProtoReflect().Descriptor().Fields()
	var names []string
	for i := range fields.Len() {
		names = append(names, string(fields.Get(i).Name()))
	}
	if got := policyKeyNames(); !slices.Equal(got, names) {
		t.Errorf("policyKeys = %v, the proto has %v", got, names)
	}
	for _, k := range policyKeys {
		if v := policyValue(defaultPolicy(), &k); v == "unset" || v == "" {
			t.Errorf("%s renders as %q", k.name, v)
		}
	}
}

func TestFormat(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{fmtMs(0), "0 ms"}, {fmtMs(0.004), "<0.01 ms"}, {fmtMs(6.4), "6.4 ms"}, {fmtMs(6.456), "6.46 ms"},
		{fmtMs(26.44), "26.4 ms"}, {fmtMs(140), "140 ms"}, {fmtMs(99999), "99999 ms"}, {fmtMs(1234567), "1235 s"},
		{fmtPct(0), "0%"}, {fmtPct(1), "100%"}, {fmtPct(0.0087), "0.87%"}, {fmtPct(1e-6), "<0.01%"},
		{fmtPct(0.1), "10%"}, {fmtPct(2.0 / 3), "66.7%"}, {fmtPct(0.99991), ">99.9%"}, {fmtPct(0.9994), "99.9%"},
		{fmtTPS(0), "default"}, {fmtTPS(9500), "9500 tok/s"}, {fmtTPS(12500), "12.5k tok/s"}, {fmtTPS(2.5e7), "25M tok/s"},
		{fmtAge(80), "80ms"}, {fmtAge(3200), "3s"}, {fmtAge(754000), "12m"}, {fmtAge(9e6), "2h"},
		{fmtWeight(1e6), "1000000"}, {fmtWeight(0.25), "0.25"},
		{fmtBlocks(4), "4 blk"}, {fmtTokens(uint32(64)), "64 tok"},
		{fmtHash(0), "0x0000000000000000"}, {fmtHash(0xeb45f3aedb78df9b), "0xeb45f3aedb78df9b"},
		{fmtDraw(0.999999), "0.9999"}, {fmtDraw(0.5), "0.5000"},
		{truncate("pod-with-long-name", 8), "pod-wit…"}, {truncate("short", 8), "short"}, {truncate("你好世界", 3), "你好…"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}
