package protoconv

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/internal/state"
	"github.com/prefixroute/prefixroute/scheduler"
)

// everyField is a report with every field of the message set to a value
// other than its default, chosen by the field's kind, so that a field
// added to ReportLoadRequest and not carried by ReportOf and ReportProto
// fails TestReportRoundTrip.
func everyField(t *testing.T) *pb.ReportLoadRequest {
	m := &pb.ReportLoadRequest{}
	r := m.ProtoReflect()
	fields := r.Descriptor().Fields()
	for i := range fields.Len() {
		f := fields.Get(i)
		if f.Name() == "ack_interval_ms" {
			continue // the stream's ack pacing (internal/report/ack.go), not part of the report's state
		}
		var v protoreflect.Value
		switch f.Kind() {
		case protoreflect.StringKind:
			v = protoreflect.ValueOfString(fmt.Sprintf("%s-%d", f.Name(), i))
		case protoreflect.BoolKind:
			v = protoreflect.ValueOfBool(true)
		case protoreflect.Uint32Kind:
			v = protoreflect.ValueOfUint32(uint32(16 + i))
		case protoreflect.Uint64Kind:
			v = protoreflect.ValueOfUint64(uint64(100 + i))
		case protoreflect.DoubleKind:
			v = protoreflect.ValueOfFloat64(0.25 + float64(i)/1000)
		case protoreflect.EnumKind:
			v = protoreflect.ValueOfEnum(2) // the last enum value that is not the default's alias
		default:
			t.Fatalf("field %s has kind %v: teach everyField a value for it", f.Name(), f.Kind())
		}
		if f.IsList() {
			l := r.NewField(f).List()
			l.Append(v)
			l.Append(protoreflect.ValueOfUint64(v.Uint() + 1))
			r.Set(f, protoreflect.ValueOfList(l))
			continue
		}
		r.Set(f, v)
	}
	return m
}

// TestReportRoundTrip: ReportProto(ReportOf(m)) is m for a report with
// every field set, and for one with none of the optional ones.
func TestReportRoundTrip(t *testing.T) {
	reg := state.NewRegistry(state.Limits{})
	for _, tc := range []struct {
		name string
		m    *pb.ReportLoadRequest
	}{
		{"every field", everyField(t)},
		{"identity only", &pb.ReportLoadRequest{Pool: "chat", Deployment: "a", InstanceId: "x", Address: "10.0.0.1:8000"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var rep state.Report
			if err := ReportOf(reg, tc.m, &rep); err != nil {
				t.Fatalf("ReportOf: %v", err)
			}
			id := state.Identity{Pool: tc.m.GetPool(), Deployment: tc.m.GetDeployment(), Instance: tc.m.GetInstanceId(), Address: tc.m.GetAddress()}
			if back := ReportProto(id, &rep); !proto.Equal(back, tc.m) {
				t.Errorf("round trip:\n got %v\nwant %v", back, tc.m)
			}
		})
	}
}

// TestReportOfRefuses: ReportOf validates against the registry's limits.
func TestReportOfRefuses(t *testing.T) {
	reg := state.NewRegistry(state.Limits{})
	var rep state.Report
	if err := ReportOf(reg, &pb.ReportLoadRequest{KvCacheUsage: 1.5}, &rep); !errors.Is(err, state.ErrInvalidReport) {
		t.Fatalf("ReportOf of kv_cache_usage 1.5: %v, want ErrInvalidReport", err)
	}
}

// TestReportRoles: every role maps to the scheduler's and back; an unknown
// one is refused with its number.
func TestReportRoles(t *testing.T) {
	reg := state.NewRegistry(state.Limits{})
	for _, tc := range []struct {
		in   pb.PdRole
		want scheduler.Role
		back pb.PdRole
	}{
		{pb.PdRole_PD_ROLE_UNSPECIFIED, scheduler.RoleBoth, pb.PdRole_PD_ROLE_UNSPECIFIED},
		{pb.PdRole_PD_ROLE_BOTH, scheduler.RoleBoth, pb.PdRole_PD_ROLE_UNSPECIFIED},
		{pb.PdRole_PD_ROLE_PREFILL, scheduler.RolePrefill, pb.PdRole_PD_ROLE_PREFILL},
		{pb.PdRole_PD_ROLE_DECODE, scheduler.RoleDecode, pb.PdRole_PD_ROLE_DECODE},
	} {
		var rep state.Report
		if err := ReportOf(reg, &pb.ReportLoadRequest{Role: tc.in}, &rep); err != nil || rep.Role != tc.want {
			t.Fatalf("%v: %v, %v", tc.in, rep.Role, err)
		}
		if got := ReportProto(state.Identity{}, &rep).GetRole(); got != tc.back {
			t.Fatalf("%v back: %v", tc.in, got)
		}
	}
	var rep state.Report
	err := ReportOf(reg, &pb.ReportLoadRequest{Role: 9}, &rep)
	if !errors.Is(err, state.ErrInvalidReport) || !strings.Contains(err.Error(), "role is 9; want 0 or 1 (both), 2 (prefill) or 3 (decode)") {
		t.Fatalf("role 9: %v", err)
	}
}

// TestReportOfNamesEveryBadField: a report with several bad fields is
// refused with one message naming each, in field order.
func TestReportOfNamesEveryBadField(t *testing.T) {
	reg := state.NewRegistry(state.Limits{MaxBlockEvents: 2})
	q := -5.0
	var rep state.Report
	err := ReportOf(reg, &pb.ReportLoadRequest{KvCacheUsage: 1.5, QueueMs: &q, PrefillTokensPerSecond: -1,
		BlockSizeTokens: 1 << 30, StoredBlockHashes: []uint64{1, 2, 3}}, &rep)
	want := "invalid load report: kv_cache_usage is 1.5; want a fraction in [0, 1]; " +
		"queue_ms is -5; want a finite number >= 0; prefill_tokens_per_second is -1; want a finite number >= 0; " +
		"block_size_tokens is 1073741824; the limit is "
	if !errors.Is(err, state.ErrInvalidReport) || !strings.HasPrefix(err.Error(), want) ||
		!strings.HasSuffix(err.Error(), "; 3 block events (stored + removed); the limit is 2 per report") {
		t.Fatalf("ReportOf: %v\nwant it to start %q and name the block events", err, want)
	}
}

// TestReportOfValidAllocs: validating a good report allocates nothing.
func TestReportOfValidAllocs(t *testing.T) {
	reg := state.NewRegistry(state.Limits{})
	var rep state.Report
	good := &pb.ReportLoadRequest{KvCacheUsage: 0.5, PrefillTokensPerSecond: 100, StoredBlockHashes: []uint64{1}}
	if n := testing.AllocsPerRun(100, func() { _ = ReportOf(reg, good, &rep) }); n != 0 {
		t.Errorf("ReportOf of a valid report: %v allocs, want 0", n)
	}
}
