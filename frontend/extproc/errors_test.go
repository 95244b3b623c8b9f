package extproc_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	procmode "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/daemon"
	"github.com/prefixroute/prefixroute/frontend/extproc"
	"github.com/prefixroute/prefixroute/internal/gateway"
)

// TestErrorClasses: each class of failed request is an ImmediateResponse
// with its status, the OpenAI-style JSON body and x-prefixroute-reason.
func TestErrorClasses(t *testing.T) {
	e := start(t, extproc.Options{Fallbacks: 2, Gateway: gateway.Config{MaxBodyBytes: 1 << 20, ModelPools: map[string]string{"ghost": "nowhere"}}})
	e.instance("llama", "blue", "b1", "10.0.0.1:8000", 0)
	e.instance("drained", "blue", "d1", "10.0.1.1:8000", 0)
	e.weights("drained", map[string]float64{"blue": 0})
	e.instance("full", "blue", "f1", "10.0.2.1:8000", 1) // KV cache full
	if _, err := e.sc.Admin.SetPolicy(context.Background(), &pb.SetPolicyRequest{AllowNewPool: true, Pool: "full",
		Policy: &pb.Policy{OnSaturation: pb.OnSaturation_ON_SATURATION_SHED}}); err != nil {
		t.Fatal(err)
	}
	e.report(&pb.ReportLoadRequest{Pool: "draining", Deployment: "blue", InstanceId: "x1", Address: "10.0.3.1:8000", Seq: 1,
		PrefillTokensPerSecond: 10000, Draining: true})
	chat := func(model string) []byte { return chatBody(model, 200, 1) }
	for _, tt := range []struct {
		name   string
		mode   procmode.ProcessingMode_BodySendMode
		path   string
		body   []*extprocv3.ProcessingRequest
		status int
		reason string
		msg    string
	}{
		{"not JSON", duplex, "/v1/chat/completions", chunked([]byte(`{"model":"llama","messages":`), 10), 400, "bad_request", "not a JSON object"},
		{"no messages", buffered, "/v1/chat/completions", chunked([]byte(`{"model":"llama"}`), 1<<20), 400, "bad_request", "messages is missing"},
		{"empty body", duplex, "/v1/chat/completions", chunked(nil, 1), 400, "bad_request", "invalid request body"},
		{"too large", duplex, "/v1/chat/completions", chunked(chatBody("llama", 2<<20, 1), 60000), 413, "body_too_large", "the limit is 1048576 bytes"},
		{"unknown endpoint", duplex, "/v1/images/generations", chunked(chat("llama"), 1<<20), 404, "unknown_endpoint", "/v1/images/generations"},
		{"unknown pool", duplex, "/v1/chat/completions", chunked(chat("mistral"), 1<<20), 404, "unknown_pool", "mistral"},
		{"model mapped to an unknown pool", buffered, "/v1/chat/completions", chunked(chat("ghost"), 1<<20), 404, "unknown_pool", "nowhere"},
		{"no eligible instance", duplex, "/v1/chat/completions", chunked(chat("draining"), 1<<20), 503, "no_eligible_instance", "draining"},
		{"drained", duplex, "/v1/chat/completions", chunked(chat("drained"), 1<<20), 503, "drained", "weight 0"},
		{"saturated", duplex, "/v1/chat/completions", chunked(chat("full"), 1<<20), 429, "saturated", "saturated"},
		{"streamed mode", procmode.ProcessingMode_STREAMED, "/v1/chat/completions", chunked(chat("llama"), 1<<20), 500, "unsupported_body_mode", "STREAMED"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			msgs := append([]*extprocv3.ProcessingRequest{reqHeaders("POST", tt.path, false, tt.mode)}, tt.body...)
			rs, err := e.exchange(context.Background(), msgs...)
			if err != nil {
				t.Fatal(err)
			}
			checkImmediate(t, rs, tt.status, tt.reason, tt.msg)
		})
	}
}

// checkImmediate checks the last response is the immediate response of an
// error class.
func checkImmediate(t *testing.T, rs []*extprocv3.ProcessingResponse, code int, reason, msg string) {
	t.Helper()
	if len(rs) == 0 {
		t.Fatal("no response")
	}
	ir := rs[len(rs)-1].GetImmediateResponse()
	if ir == nil {
		t.Fatalf("last response %v, want an immediate response", rs[len(rs)-1])
	}
	if int(ir.GetStatus().GetCode()) != code {
		t.Errorf("status %d, want %d (%s)", ir.GetStatus().GetCode(), code, ir.GetBody())
	}
	hs := map[string]string{}
	for _, h := range ir.GetHeaders().GetSetHeaders() {
		hs[h.GetHeader().GetKey()] = string(h.GetHeader().GetRawValue())
	}
	if hs["x-prefixroute-reason"] != reason || hs["content-type"] != "application/json" {
		t.Errorf("headers %v, want reason %s and JSON", hs, reason)
	}
	var body struct {
		Error struct{ Message, Type, Code string }
	}
	if err := json.Unmarshal(ir.GetBody(), &body); err != nil {
		t.Fatalf("body %s: %v", ir.GetBody(), err)
	}
	if body.Error.Code != reason || !strings.Contains(body.Error.Message, msg) || body.Error.Type == "" {
		t.Errorf("body %s, want code %s and a message containing %q", ir.GetBody(), reason, msg)
	}
}

func TestSubsetErrors(t *testing.T) {
	e := start(t, extproc.Options{Fallbacks: 2}, func(c *daemon.Config) { c.Server.Limits.MaxExcludes = 2 })
	for i, a := range []string{"10.0.0.1:8000", "10.0.0.2:8000", "10.0.0.3:8000", "10.0.0.4:8000"} {
		e.instance("llama", "blue", "i"+string(rune('1'+i)), a, 0)
	}
	for _, tt := range []struct {
		name    string
		entries []any
		status  int
		reason  string
		msg     string
	}{
		{"empty list", []any{}, 503, "empty_subset", "lists no endpoint"},
		{"no instance in it", []any{"10.9.9.9:8000", "10.0.0.1:9999"}, 503, "no_eligible_instance", `none of pool "llama"'s 4 instances`},
		{"complement over the exclude limit", []any{"10.0.0.1:8000"}, 500, "subset_exclude_limit", "leaves 3 of pool \"llama\"'s 4 instances to exclude; a pick may exclude at most 2"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rs, err := e.exchange(context.Background(), withSubset(reqHeaders("POST", "/v1/chat/completions", false, duplex), tt.entries...),
				reqBody(chatBody("llama", 100, 1), true))
			if err != nil {
				t.Fatal(err)
			}
			checkImmediate(t, rs, tt.status, tt.reason, tt.msg)
		})
	}
	// Within the limit the pick honours the subset.
	rs, err := e.exchange(context.Background(), withSubset(reqHeaders("POST", "/v1/chat/completions", false, duplex), "10.0.0.1:8000", "10.0.0.4"),
		reqBody(chatBody("llama", 100, 1), true))
	if err != nil {
		t.Fatal(err)
	}
	if d := decisionOf(t, rs); d.header != "10.0.0.1:8000,10.0.0.4:8000" && d.header != "10.0.0.4:8000,10.0.0.1:8000" {
		t.Fatalf("destination %q, want the two subset instances", d.header)
	}
}

// TestProtocolErrors: messages out of order end the stream with
// InvalidArgument naming what was wrong.
func TestProtocolErrors(t *testing.T) {
	e := start(t, extproc.Options{})
	e.instance("llama", "blue", "b1", "10.0.0.1:8000", 0)
	body := chatBody("llama", 100, 1)
	for _, tt := range []struct {
		name string
		msgs []*extprocv3.ProcessingRequest
		msg  string
	}{
		{"body first", []*extprocv3.ProcessingRequest{reqBody(body, true)}, "request_body before request_headers"},
		{"headers twice", []*extprocv3.ProcessingRequest{reqHeaders("POST", "/v1/chat/completions", false, duplex), reqHeaders("POST", "/v1/chat/completions", false, duplex)}, "request_headers received twice"},
		{"body after end of stream", []*extprocv3.ProcessingRequest{reqHeaders("POST", "/v1/chat/completions", false, duplex), reqBody(body, true), reqBody(body, true)}, "request_body after the request's end of stream"},
		{"empty message", []*extprocv3.ProcessingRequest{{}}, "a ProcessingRequest without"},
		{"trailers first", []*extprocv3.ProcessingRequest{{Request: &extprocv3.ProcessingRequest_RequestTrailers{RequestTrailers: &extprocv3.HttpTrailers{}}}}, "request_trailers before request_headers"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := e.exchange(context.Background(), tt.msgs...)
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("err = %v, want InvalidArgument with %q", err, tt.msg)
			}
		})
	}
}
