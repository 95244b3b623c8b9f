package protoconv

import (
	"errors"
	"fmt"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/internal/state"
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
			continue // the stream's ack pacing (server/load_ack.go), not part of the report's state
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
