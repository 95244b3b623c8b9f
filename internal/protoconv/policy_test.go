package protoconv

import (
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/durationpb"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/scheduler"
)

// TestPolicyFieldsMatchProto: every field of pb.Policy has a row in
// scheduler.PolicyFields of a matching kind and every row a proto field,
// in the same order; every enum name has a proto value and every proto
// value other than 0 a name.
func TestPolicyFieldsMatchProto(t *testing.T) {
	rows := scheduler.PolicyFields()
	if policyDesc.Len() != len(rows) {
		t.Errorf("pb.Policy has %d fields, scheduler.PolicyFields %d rows", policyDesc.Len(), len(rows))
	}
	kinds := map[scheduler.FieldKind]protoreflect.Kind{
		scheduler.FieldFloat: protoreflect.DoubleKind, scheduler.FieldUint32: protoreflect.Uint32Kind,
		scheduler.FieldUint64: protoreflect.Uint64Kind, scheduler.FieldDuration: protoreflect.MessageKind,
		scheduler.FieldEnum: protoreflect.EnumKind,
	}
	for i := range policyDesc.Len() {
		fd := policyDesc.Get(i)
		f, ok := scheduler.PolicyFieldByKey(string(fd.Name()))
		if !ok {
			t.Errorf("pb.Policy field %s has no row in scheduler.PolicyFields", fd.Name())
			continue
		}
		if i < len(rows) && rows[i].Key != f.Key {
			t.Errorf("row %d is %s, proto field %d is %s", i, rows[i].Key, i, fd.Name())
		}
		if fd.Kind() != kinds[f.Kind] {
			t.Errorf("%s: proto kind %v, row kind %d", f.Key, fd.Kind(), f.Kind)
		}
		if f.Kind == scheduler.FieldDuration && fd.Message().FullName() != "google.protobuf.Duration" {
			t.Errorf("%s: message %s, want a Duration", f.Key, fd.Message().FullName())
		}
		if f.Kind != scheduler.FieldEnum {
			if !fd.HasPresence() {
				t.Errorf("%s: not optional, so an unset field cannot be told from 0", f.Key)
			}
			continue
		}
		vals := fd.Enum().Values()
		if vals.Len() != len(f.Names)+1 {
			t.Errorf("%s: %d proto values, %d names (+ unspecified)", f.Key, vals.Len(), len(f.Names))
		}
		for v, name := range f.Names {
			n := enumNumber(fd.Enum(), name)
			if got, ok := enumValue(&f, fd.Enum(), n); n == 0 || !ok || got != uint8(v) {
				t.Errorf("%s: %s is proto %d, back %d %v", f.Key, name, n, got, ok)
			}
		}
	}
	for _, f := range rows {
		if policyDesc.ByName(protoreflect.Name(f.Key)) == nil {
			t.Errorf("row %s has no pb.Policy field", f.Key)
		}
	}
}

// everyPolicyField is a valid policy whose every field differs from the
// default.
func everyPolicyField() scheduler.Policy {
	return scheduler.Policy{Strategy: scheduler.Argmin, LambdaH: 3, DeltaMs: 7, ThresholdRatio: 0.2, ThresholdMinMs: 11,
		BatchWaitMs: 2, BlockSizeTokens: 64, DefaultPrefillTokensPerSecond: 1234, MaxKVUsage: 0.9, MaxQueueMs: 500,
		DeploymentDeltaMs: 40, StaleAfter: 3 * time.Second, ForgetAfter: time.Minute, DefaultKVCapacityBlocks: 99,
		OnSaturation: scheduler.SaturationQueue, DoublingContextTokens: 33000, OnSLOMiss: scheduler.SLOShed,
		Calibration:         scheduler.CalibrationObserve,
		PDMinUncachedTokens: 2048, PDTransferMsPerToken: 0.02, PDFallback: scheduler.PDFallbackFail,
		PDInterferenceWeight: 0.3,
		PDDecodeRunningMs:    7,
		PDMode:               scheduler.PDAlways,
		ShortLanes:           2, ShortLaneMaxPrefillMs: 250,
		QueueTTL: 5 * time.Second, QueueMaxWaiting: 77, QueueMaxPerBand: 55, DispatchSpacingMs: 12.5}
}

// TestPolicyRoundTrip: every field is rendered, and merging the message
// onto the default policy gives the policy back.
func TestPolicyRoundTrip(t *testing.T) {
	p := everyPolicyField()
	m := PolicyProto(&p)
	r := m.ProtoReflect()
	for i := range policyDesc.Len() {
		if fd := policyDesc.Get(i); !r.Has(fd) {
			t.Errorf("PolicyProto left %s unset", fd.Name())
		}
	}
	want := &pb.Policy{Strategy: pb.Strategy_STRATEGY_ARGMIN, LambdaH: proto.Float64(3), DeltaMs: proto.Float64(7),
		ThresholdRatio: proto.Float64(0.2), ThresholdMinMs: proto.Float64(11), BatchWaitMs: proto.Float64(2),
		BlockSizeTokens: proto.Uint32(64), DefaultPrefillTokensPerSecond: proto.Float64(1234), MaxKvUsage: proto.Float64(0.9),
		MaxQueueMs: proto.Float64(500), DeploymentDeltaMs: proto.Float64(40), StaleAfter: durationpb.New(3 * time.Second),
		ForgetAfter: durationpb.New(time.Minute), DefaultKvCapacityBlocks: proto.Uint64(99),
		OnSaturation: pb.OnSaturation_ON_SATURATION_QUEUE, DoublingContextTokens: proto.Float64(33000),
		OnSloMiss: pb.SloOnMiss_SLO_ON_MISS_SHED, Calibration: pb.SloCalibration_SLO_CALIBRATION_OBSERVE,
		PdMinUncachedTokens: proto.Uint32(2048), PdTransferMsPerToken: proto.Float64(0.02), PdFallback: pb.PdFallback_PD_FALLBACK_FAIL,
		PdInterferenceWeight: proto.Float64(0.3),
		PdDecodeRunningMs:    proto.Float64(7),
		PdMode:               pb.PdMode_PD_MODE_ALWAYS,
		ShortLanes:           proto.Uint32(2), ShortLaneMaxPrefillMs: proto.Float64(250),
		QueueTtl: durationpb.New(5 * time.Second), QueueMaxWaiting: proto.Uint32(77), QueueMaxPerBand: proto.Uint32(55), DispatchSpacingMs: proto.Float64(12.5)}
	if !proto.Equal(m, want) {
		t.Fatalf("PolicyProto = %v\nwant %v", m, want)
	}
	got, err := MergePolicy(scheduler.DefaultPolicy(), m)
	if err != nil || got != p {
		t.Fatalf("MergePolicy = %+v, %v; want %+v", got, err, p)
	}
	if s := SharedPolicyProto(&p); !proto.Equal(s, want) || SharedPolicyProto(&p) != s {
		t.Fatalf("SharedPolicyProto = %v, not the one message of an equal policy", s)
	}
	d := scheduler.DefaultPolicy()
	if s := SharedPolicyProto(&d); !proto.Equal(s, PolicyProto(&d)) {
		t.Fatalf("SharedPolicyProto(default) = %v", s)
	}
}

// TestMergePolicy: unset fields keep the base; what the message cannot
// carry and what Validate refuses are reported together, by field name.
func TestMergePolicy(t *testing.T) {
	base := everyPolicyField()
	for _, tc := range []struct {
		name string
		m    *pb.Policy
		want func(p *scheduler.Policy)
		err  string
	}{
		{"nil", nil, func(*scheduler.Policy) {}, ""},
		{"empty keeps all", &pb.Policy{}, func(*scheduler.Policy) {}, ""},
		{"one field", &pb.Policy{DeltaMs: proto.Float64(30)}, func(p *scheduler.Policy) { p.DeltaMs = 30 }, ""},
		{"zero is a value", &pb.Policy{MaxQueueMs: proto.Float64(0)}, func(p *scheduler.Policy) { p.MaxQueueMs = 0 }, ""},
		{"enums", &pb.Policy{Strategy: pb.Strategy_STRATEGY_THRESHOLD, OnSaturation: pb.OnSaturation_ON_SATURATION_LEAST_LOADED},
			func(p *scheduler.Policy) {
				p.Strategy, p.OnSaturation = scheduler.Threshold, scheduler.SaturationLeastLoaded
			}, ""},
		{"unknown strategy", &pb.Policy{Strategy: 9}, nil, "invalid policy: strategy must be softmax, threshold or argmin, got 9"},
		{"unknown on_saturation", &pb.Policy{OnSaturation: 9}, nil, "invalid policy: on_saturation must be least_loaded, shed or queue, got 9"},
		{"bad duration and range", &pb.Policy{StaleAfter: &durationpb.Duration{Seconds: 1, Nanos: -1}, DeltaMs: proto.Float64(-1)}, nil,
			// "…": the proto library's text of the duration, whose spacing varies
			"invalid policy: stale_after is not a valid duration: …has seconds and nanos with different signs; " +
				"delta_ms must be in [0.001, 1000000] ms, got -1"},
		{"cross-field", &pb.Policy{ForgetAfter: durationpb.New(time.Second)}, nil,
			"invalid policy: forget_after must be >= stale_after (3s), got 1s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := MergePolicy(base, tc.m)
			if tc.err != "" {
				head, tail, cut := strings.Cut(tc.err, "…")
				if !errors.Is(err, scheduler.ErrInvalidPolicy) || (!cut && err.Error() != tc.err) ||
					(cut && !(strings.HasPrefix(err.Error(), head) && strings.HasSuffix(err.Error(), tail))) {
					t.Fatalf("MergePolicy error %v\nwant %s", err, tc.err)
				}
				return
			}
			want := base
			tc.want(&want)
			if err != nil || got != want {
				t.Fatalf("MergePolicy = %+v, %v; want %+v", got, err, want)
			}
		})
	}
}

// TestSharedPolicyProtoAllocs: an audited pick renders its policy from the
// cache without allocating.
func TestSharedPolicyProtoAllocs(t *testing.T) {
	p := everyPolicyField()
	SharedPolicyProto(&p)
	if n := testing.AllocsPerRun(100, func() { SharedPolicyProto(&p) }); n != 0 {
		t.Fatalf("%v allocations per call, want 0", n)
	}
}
