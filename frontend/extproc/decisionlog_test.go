package extproc_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/prefixroute/prefixroute/daemon"
	"github.com/prefixroute/prefixroute/frontend/extproc"
	"github.com/prefixroute/prefixroute/internal/servertest"
)

// TestRequestIDAndTrace: the pick of an ext_proc request carries the
// HTTP request's x-request-id and traceparent into the decision log, as a
// gRPC Pick does.
func TestRequestIDAndTrace(t *testing.T) {
	path := filepath.Join(t.TempDir(), "decisions.jsonl")
	e := start(t, extproc.Options{}, func(c *daemon.Config) { c.DecisionLog, c.DecisionLogRate = path, 1 })
	threeDeployments(e)
	const trace = "4bf92f3577b34da6a3ce929d0e0e4736"
	rs, err := e.exchange(context.Background(), reqHeaders("POST", "/v1/chat/completions", false, duplex,
		"x-request-id", "req-42", "traceparent", "00-"+trace+"-00f067aa0ba902b7-01"), reqBody(chatBody("llama", 300, 1), true))
	if err != nil {
		t.Fatal(err)
	}
	decisionOf(t, rs)
	servertest.Eventually(t, "the decision log line of the request", func() bool {
		b, _ := os.ReadFile(path)
		return strings.Contains(string(b), `"request_id":"req-42"`) && strings.Contains(string(b), `"trace_id":"`+trace+`"`)
	})
}

// TestPickSpan: each pick has a span, a child of the request's
// traceparent, with the decision's attributes (set by PickFor as for a
// gRPC Pick).
func TestPickSpan(t *testing.T) {
	e := start(t, extproc.Options{})
	threeDeployments(e)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer func() { _ = tp.Shutdown(context.Background()) }() // in-memory recorder: nothing to flush
	p, err := extproc.New(e.sc.D.Server(), extproc.Options{Tracer: tp, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	const trace = "4bf92f3577b34da6a3ce929d0e0e4736"
	st := &memStream{ctx: context.Background(), msgs: []*extprocv3.ProcessingRequest{
		reqHeaders("POST", "/v1/chat/completions", false, duplex, "traceparent", "00-"+trace+"-00f067aa0ba902b7-01"),
		reqBody(chatBody("llama", 300, 1), true)}}
	if err := p.Process(st); err != nil {
		t.Fatal(err)
	}
	spans := rec.Ended()
	if len(spans) != 1 {
		t.Fatalf("%d spans, want 1", len(spans))
	}
	s := spans[0]
	attrs := map[string]string{}
	for _, kv := range s.Attributes() {
		attrs[string(kv.Key)] = kv.Value.String()
	}
	if s.Name() != "prefixroute.extproc/Pick" || s.SpanContext().TraceID().String() != trace || s.Parent().SpanID().String() != "00f067aa0ba902b7" ||
		attrs["prefixroute.pool"] != "llama" || attrs["prefixroute.deployment"] == "" {
		t.Fatalf("span %s trace %s parent %s attributes %v", s.Name(), s.SpanContext().TraceID(), s.Parent().SpanID(), attrs)
	}
}

// TestServedMismatchInDecisionLog: a request the gateway served on another
// endpoint than the chosen one leaves a served_mismatch line in the
// decision log, with the pick's request id, the chosen and the served
// endpoint; the pick's own line stays as it was.
func TestServedMismatchInDecisionLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "decisions.jsonl")
	e := start(t, extproc.Options{}, func(c *daemon.Config) { c.DecisionLog, c.DecisionLogRate = path, 1 })
	threeDeployments(e)
	rs, err := e.exchange(context.Background(), reqHeaders("POST", "/v1/chat/completions", false, duplex, "x-request-id", "req-7"),
		reqBody(chatBody("llama", 300, 2), true), respHeaders("10.9.9.9:1"))
	if err != nil {
		t.Fatal(err)
	}
	chosen, _, _ := strings.Cut(decisionOf(t, rs).header, ",")
	want := `"kind":"served_mismatch","pool":"llama","request_id":"req-7","chosen":"` + chosen + `","served":"10.9.9.9:1"}`
	servertest.Eventually(t, "the served_mismatch line", func() bool {
		b, _ := os.ReadFile(path)
		return strings.Contains(string(b), want) && strings.Count(string(b), `"request_id":"req-7"`) == 2
	})
}
