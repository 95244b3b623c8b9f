package httproute_test

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/daemon"
	"github.com/prefixroute/prefixroute/frontend/httproute"
	"github.com/prefixroute/prefixroute/internal/gateway"
	"github.com/prefixroute/prefixroute/internal/servertest"
)

// chatBody is an OpenAI chat request for model with one user message.
func chatBody(model, text string) string {
	b, _ := json.Marshal(map[string]any{"model": model, "messages": []map[string]string{{"role": "user", "content": text}}})
	return string(b)
}

// routeHeader is what a gateway sends with /v1/route: the client's path.
func routeHeader(path string) http.Header {
	return http.Header{httproute.OriginalURIHeader: {path}}
}

// openAIError is gateway.Error's JSON body.
type openAIError struct {
	Error struct{ Message, Type, Code string } `json:"error"`
}

// TestHTTPRoute: /v1/route answers 204 with the chosen address first, the
// other eligible instances as fallbacks, and the choice in x-prefixroute-*
// headers; the pool comes from ?pool=, the model map or the model.
func TestHTTPRoute(t *testing.T) {
	e := servertest.Start(t, servertest.Config(func(c *daemon.Config) {
		c.Gateway = gateway.Config{ModelPools: map[string]string{"gpt-x": "chat"}}
	}))
	report(e, rep("chat", "a", "a-1"))
	report(e, rep("chat", "b", "b-1"))
	report(e, rep("chat", "b", "b-2"))
	for _, tc := range []struct{ name, query, model string }{
		{"model names the pool", "", "chat"},
		{"model map", "", "gpt-x"},
		{"?pool= wins", "?pool=chat", "unknown-model"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := post(t, e.D, "/v1/route"+tc.query, chatBody(tc.model, "hello "+tc.name), routeHeader("/v1/chat/completions"))
			if a.status != http.StatusNoContent || len(a.body) != 0 {
				t.Fatalf("status %d, body %q", a.status, a.body)
			}
			dest := strings.Split(a.header.Get(gateway.DestinationHeader), ",")
			inst, dep := a.header.Get(httproute.InstanceHeader), a.header.Get(httproute.DeploymentHeader)
			if len(dest) != 3 || dest[0] != inst+":8000" || dep != inst[:1] {
				t.Fatalf("destination %q, instance %q, deployment %q", dest, inst, dep)
			}
			seen := map[string]bool{}
			for _, d := range dest {
				seen[d] = true
			}
			if !seen["a-1:8000"] || !seen["b-1:8000"] || !seen["b-2:8000"] {
				t.Errorf("destination %q does not list each instance once", dest)
			}
			// The ids of the list, for /v1/outcome: each address is id:8000.
			ids := strings.Split(a.header.Get(httproute.InstancesHeader), ",")
			for i := range dest {
				if i >= len(ids) || ids[i]+":8000" != dest[i] {
					t.Errorf("instances %q do not parallel destination %q", ids, dest)
					break
				}
			}
			if p := a.header.Get(httproute.PoolHeader); p != "chat" {
				t.Errorf("pool header %q, want chat", p)
			}
			pr, err := strconv.ParseFloat(a.header.Get(httproute.ProbabilityHeader), 64)
			if err != nil || pr <= 0 || pr > 1 {
				t.Errorf("probability %q: %v", a.header.Get(httproute.ProbabilityHeader), err)
			}
			if r := a.header.Get(gateway.ReasonHeader); r != "" {
				t.Errorf("reason %q on a success", r)
			}
		})
	}
}

// TestHTTPRouteErrors: a request that gets no instance gets the gateway
// package's status, reason header and OpenAI-style JSON error.
func TestHTTPRouteErrors(t *testing.T) {
	e := servertest.Start(t, servertest.Config(func(c *daemon.Config) { c.Gateway.MaxBodyBytes = 1024 }))
	report(e, rep("chat", "a", "a-1"))
	if _, err := e.Admin.SetWeights(ctx(t), &pb.SetWeightsRequest{AllowNewPool: true, Pool: "drained", Weights: map[string]float64{"a": 0}, AllowDrain: true}); err != nil {
		t.Fatal(err)
	}
	report(e, rep("drained", "a", "d-1"))
	chat := routeHeader("/v1/chat/completions")
	t.Run("at the limit", func(t *testing.T) {
		pad := func(n int) string { return chatBody("chat", strings.Repeat("x", n-len(chatBody("chat", "")))) }
		if a := post(t, e.D, "/v1/route", pad(1024), chat); a.status != http.StatusNoContent {
			t.Errorf("body of 1024 bytes: %d %s", a.status, a.body)
		}
		if a := post(t, e.D, "/v1/route", pad(1025), chat); a.status != http.StatusRequestEntityTooLarge {
			t.Errorf("body of 1025 bytes: %d %s", a.status, a.body)
		}
	})
	for _, tc := range []struct {
		name, body string
		header     http.Header
		status     int
		reason     string
		msg        string
	}{
		{"unknown model", chatBody("nope", "hi"), chat, 404, gateway.ReasonUnknownPool, `pool not found: "nope"`},
		{"no model", `{"messages":[{"role":"user","content":"hi"}]}`, chat, 400, gateway.ReasonBadRequest, "model is missing or empty"},
		{"no path", chatBody("chat", "hi"), nil, 400, gateway.ReasonBadRequest, "no X-Original-URI header"},
		{"not an OpenAI endpoint", chatBody("chat", "hi"), routeHeader("/v1/models"), 404, gateway.ReasonUnknownEndpoint, `"/v1/models"`},
		{"not JSON", `{"model":`, chat, 400, gateway.ReasonBadRequest, "invalid request body"},
		{"over the body limit", chatBody("chat", strings.Repeat("x", 1024)), chat, 413, gateway.ReasonBodyTooLarge,
			"request body too large: 1082 bytes; the limit is 1024 bytes"},
		{"every weight 0", chatBody("drained", "hi"), chat, 503, gateway.ReasonDrained, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := post(t, e.D, "/v1/route", tc.body, tc.header)
			var body openAIError
			if err := json.Unmarshal(a.body, &body); err != nil {
				t.Fatalf("status %d, body %q: %v", a.status, a.body, err)
			}
			if a.status != tc.status || a.header.Get(gateway.ReasonHeader) != tc.reason || body.Error.Code != tc.reason ||
				!strings.Contains(body.Error.Message, tc.msg) {
				t.Fatalf("status %d, reason %q, body %s; want %d %s mentioning %q",
					a.status, a.header.Get(gateway.ReasonHeader), a.body, tc.status, tc.reason, tc.msg)
			}
			if a.header.Get(gateway.DestinationHeader) != "" || a.header.Get("Content-Type") != "application/json" {
				t.Errorf("headers %v", a.header)
			}
		})
	}
}

// TestHTTPRouteTraceAndDecisionLog: a routed request is in the decision
// log under the caller's W3C trace id and x-request-id, and no part of its
// body is.
func TestHTTPRouteTraceAndDecisionLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "decisions.jsonl")
	e := servertest.Start(t, servertest.Config(func(c *daemon.Config) { c.DecisionLog, c.DecisionLogRate = path, 1 }))
	report(e, rep("chat", "a", "a-1"))
	h := routeHeader("/v1/chat/completions")
	h.Set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	h.Set("x-request-id", "req-77")
	if a := post(t, e.D, "/v1/route", chatBody("chat", "the secret prompt"), h); a.status != 204 {
		t.Fatalf("status %d: %s", a.status, a.body)
	}
	e.Stop()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	log := string(b)
	if strings.Count(log, "\n") != 1 || !strings.Contains(log, `"trace_id":"4bf92f3577b34da6a3ce929d0e0e4736"`) ||
		!strings.Contains(log, `"req-77"`) {
		t.Errorf("decision log %s: want one line with the trace id and request id", log)
	}
	if strings.Contains(log, "secret") {
		t.Errorf("the decision log holds the prompt: %s", log)
	}
}
