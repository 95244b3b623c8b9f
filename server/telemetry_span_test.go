package server

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/frontend"
)

// TestPickSpanAttributes runs Picks through PickFor under a recording span
// and checks the attributes it put on it: the chosen deployment and
// instance, the strategy, the probability of the choice and the seed, at
// every audit level (AUDIT_LEVEL_NONE too: the response then carries no
// decision, the span still the seed), or only the pool and strategy when
// the pick failed.
func TestPickSpanAttributes(t *testing.T) {
	s, _ := obsPickServer(t, true)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer func() {
		if err := tp.Shutdown(context.Background()); err != nil {
			t.Errorf("TracerProvider.Shutdown: %v", err)
		}
	}()

	for _, c := range []struct {
		name    string
		req     *pb.PickRequest
		chosen  bool
		exclude string
	}{
		{"chosen", obsPickRequest(), true, ""},
		{"chosen, audit none", obsPickRequestAt(pb.AuditLevel_AUDIT_LEVEL_NONE), true, ""},
		{"no eligible instance", &pb.PickRequest{Pool: "bench", ExcludeInstances: []string{"i0", "i1", "i2", "i3", "i4", "i5", "i6"}}, false, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, span := tp.Tracer("test").Start(context.Background(), "Pick")
			resp, err := s.PickFor(ctx, c.req, frontend.PickMeta{})
			span.End()
			if (err == nil) != c.chosen {
				t.Fatalf("Pick: %v", err)
			}
			spans := rec.Ended()
			attrs := map[attribute.Key]attribute.Value{}
			for _, kv := range spans[len(spans)-1].Attributes() {
				attrs[kv.Key] = kv.Value
			}
			if attrs[attrPool].AsString() != "bench" || attrs[attrStrategy].AsString() != "softmax" {
				t.Errorf("pool %v, strategy %v", attrs[attrPool], attrs[attrStrategy])
			}
			_, hasDeployment := attrs[attrDeployment]
			if hasDeployment != c.chosen {
				t.Errorf("deployment attribute present = %v, want %v (attributes %v)", hasDeployment, c.chosen, attrs)
			}
			if !c.chosen {
				return
			}
			r := resp
			var joint float64
			for _, in := range r.GetDecision().GetInstances() {
				if in.GetInstanceId() == r.GetInstanceId() {
					joint = in.GetJointProbability()
				}
			}
			want := map[attribute.Key]attribute.Value{
				attrDeployment: attribute.StringValue(r.GetDeployment()),
				attrInstance:   attribute.StringValue(r.GetInstanceId()),
				attrBlocks:     attribute.IntValue(32),
				attrSeed:       attribute.StringValue("1"),
			}
			if r.GetDecision() == nil { // AUDIT_LEVEL_NONE: the span has the choice's probability all the same
				joint = attrs[attrProbability].AsFloat64()
			} else {
				want[attrProbability] = attribute.Float64Value(joint)
			}
			for k, want := range want {
				if attrs[k] != want {
					t.Errorf("%s = %v, want %v", k, attrs[k].String(), want.String())
				}
			}
			if !(joint > 0) {
				t.Errorf("joint probability of the choice %v", joint)
			}
		})
	}
}
