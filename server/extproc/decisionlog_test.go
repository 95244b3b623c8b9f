package extproc_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prefixroute/prefixroute/internal/servertest"
	"github.com/prefixroute/prefixroute/server"
	"github.com/prefixroute/prefixroute/server/extproc"
)

// TestRequestIDAndTrace: the pick of an ext_proc request carries the
// HTTP request's x-request-id and traceparent into the decision log, as a
// gRPC Pick does.
func TestRequestIDAndTrace(t *testing.T) {
	path := filepath.Join(t.TempDir(), "decisions.jsonl")
	e := start(t, extproc.Options{}, func(c *server.DaemonConfig) { c.DecisionLog, c.DecisionLogRate = path, 1 })
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
