package extproc_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	procmode "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc/health/grpc_health_v1"

	"github.com/prefixroute/prefixroute/frontend/extproc"
)

const (
	duplex   = procmode.ProcessingMode_FULL_DUPLEX_STREAMED
	buffered = procmode.ProcessingMode_BUFFERED
)

// chatBody is a chat request of about n bytes, distinct per seed.
func chatBody(model string, n, seed int) []byte {
	head := fmt.Sprintf(`{"model":%q,"messages":[{"role":"system","content":"request %d "},{"role":"user","content":"`, model, seed)
	tail := `"}],"max_tokens":16}`
	fill := max(0, n-len(head)-len(tail))
	return []byte(head + strings.Repeat("x", fill) + tail)
}

// threeDeployments is a pool "llama" of three deployments with one
// instance each and weights 6:3:1, so that joint probabilities are
// ordered blue > green > red on a cold cache.
func threeDeployments(e *env) {
	e.instance("llama", "blue", "b1", "10.0.0.1:8000", 0)
	e.instance("llama", "green", "g1", "10.0.0.2:8000", 0)
	e.instance("llama", "red", "r1", "10.0.0.3:8000", 0)
	e.weights("llama", map[string]float64{"blue": 6, "green": 3, "red": 1})
}

var byProbability = []string{"10.0.0.1:8000", "10.0.0.2:8000", "10.0.0.3:8000"}

// wantFallbacks is the destination list for a chosen address: it, then
// the others by descending probability.
func wantFallbacks(chosen string, n int) string {
	out := []string{chosen}
	for _, a := range byProbability {
		if a != chosen && len(out) <= n {
			out = append(out, a)
		}
	}
	return strings.Join(out, ",")
}

func TestRoutedBothModes(t *testing.T) {
	e := start(t, extproc.Options{Fallbacks: 2, DecisionHeader: "x-prefixroute-decision"})
	threeDeployments(e)
	for _, tt := range []struct {
		name  string
		mode  procmode.ProcessingMode_BodySendMode
		size  int
		chunk int
	}{
		{"duplex, one chunk", duplex, 2 << 10, 1 << 20},
		{"duplex, 100-byte chunks", duplex, 20 << 10, 100},
		{"duplex, 5 MiB in 64 KiB chunks", duplex, 5 << 20, 64 << 10},
		{"buffered", buffered, 64 << 10, 1 << 30},
		{"no protocol_config: the default mode, duplex", procmode.ProcessingMode_NONE, 2 << 10, 1000},
	} {
		t.Run(tt.name, func(t *testing.T) {
			body := chatBody("llama", tt.size, tt.size+tt.chunk)
			msgs := append([]*extprocv3.ProcessingRequest{reqHeaders("POST", "/v1/chat/completions", false, tt.mode, "x-request-id", "req-1")},
				chunked(body, tt.chunk)...)
			rs, err := e.exchange(context.Background(), msgs...)
			if err != nil {
				t.Fatal(err)
			}
			d := decisionOf(t, rs)
			if d.header == "" || d.header != d.metadata || !d.clearRouteCache {
				t.Fatalf("header %q, metadata %q, clear_route_cache %v: want the same destination twice and clear_route_cache", d.header, d.metadata, d.clearRouteCache)
			}
			chosen, _, _ := strings.Cut(d.header, ",")
			if want := wantFallbacks(chosen, 2); d.header != want {
				t.Fatalf("destination %q, want %q (fallbacks by probability)", d.header, want)
			}
			// Cold cache, one instance a deployment: P = the weight's share.
			want := map[string]string{"10.0.0.1:8000": "deployment=blue; probability=0.6",
				"10.0.0.2:8000": "deployment=green; probability=0.3", "10.0.0.3:8000": "deployment=red; probability=0.1"}[chosen]
			if dh := d.extra["x-prefixroute-decision"]; dh != want {
				t.Errorf("decision header %q, want %q", dh, want)
			}
			if tt.mode == buffered {
				if d.chunks != 0 || len(rs) != 2 {
					t.Fatalf("buffered: %d streamed chunks, %d responses; want none and 2 (headers, body)", d.chunks, len(rs))
				}
				return
			}
			if !bytes.Equal(d.body, body) || !d.eos || d.maxChunk > extproc.BodyChunkBytes {
				t.Fatalf("body back: %d bytes (equal %v) in %d chunks of at most %d bytes, eos %v; want %d bytes, chunks <= %d",
					len(d.body), bytes.Equal(d.body, body), d.chunks, d.maxChunk, d.eos, len(body), extproc.BodyChunkBytes)
			}
			if want := (len(body) + extproc.BodyChunkBytes - 1) / extproc.BodyChunkBytes; d.chunks != want {
				t.Errorf("%d chunks, want %d", d.chunks, want)
			}
		})
	}
}

func TestFallbacksOff(t *testing.T) {
	e := start(t, extproc.Options{Fallbacks: 0})
	threeDeployments(e)
	rs, err := e.exchange(context.Background(), reqHeaders("POST", "/v1/completions", false, duplex), reqBody([]byte(`{"model":"llama","prompt":"hi"}`), true))
	if err != nil {
		t.Fatal(err)
	}
	d := decisionOf(t, rs)
	if strings.Contains(d.header, ",") || d.header != d.metadata || d.header == "" {
		t.Fatalf("destination %q / %q, want one endpoint", d.header, d.metadata)
	}
}

func TestSubsetHint(t *testing.T) {
	e := start(t, extproc.Options{Fallbacks: 2})
	threeDeployments(e)
	for i := 0; i < 20; i++ {
		h := withSubset(reqHeaders("POST", "/v1/chat/completions", false, duplex), "10.0.0.3:8000", "10.0.0.9")
		rs, err := e.exchange(context.Background(), h, reqBody(chatBody("llama", 300, i), true))
		if err != nil {
			t.Fatal(err)
		}
		if d := decisionOf(t, rs); d.header != "10.0.0.3:8000" || d.metadata != d.header {
			t.Fatalf("destination %q / %q, want only the subset's 10.0.0.3:8000", d.header, d.metadata)
		}
	}
	// An entry without a port matches the host.
	rs, err := e.exchange(context.Background(), withSubset(reqHeaders("POST", "/v1/chat/completions", false, duplex), "10.0.0.2"),
		reqBody(chatBody("llama", 300, 99), true))
	if err != nil {
		t.Fatal(err)
	}
	if d := decisionOf(t, rs); d.header != "10.0.0.2:8000" {
		t.Fatalf("destination %q, want 10.0.0.2:8000", d.header)
	}
}

func TestGetPassesThrough(t *testing.T) {
	e := start(t, extproc.Options{Fallbacks: 2})
	rs, err := e.exchange(context.Background(), reqHeaders("GET", "/v1/models", true, duplex), respHeaders(""), respBody([]byte(`{"data":[]}`), true))
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 3 {
		t.Fatalf("%d responses, want 3 (request headers, response headers, response body)", len(rs))
	}
	if h := rs[0].GetRequestHeaders(); h == nil || h.GetResponse() != nil || rs[0].GetDynamicMetadata() != nil {
		t.Fatalf("GET answered %v, want an empty request-headers response", rs[0])
	}
	if rs[1].GetResponseHeaders() == nil || rs[1].GetResponseHeaders().GetResponse() != nil {
		t.Fatalf("response headers answered %v", rs[1])
	}
	if sb := rs[2].GetResponseBody().GetResponse().GetBodyMutation().GetStreamedResponse(); string(sb.GetBody()) != `{"data":[]}` || !sb.GetEndOfStream() {
		t.Fatalf("response body answered %v, want it echoed (duplex)", rs[2])
	}
}

// TestSpoofedDestinationRemoved: a client's own destination header never
// reaches the router of the gateway: removed on a request without a body,
// overwritten on a routed one.
func TestSpoofedDestinationRemoved(t *testing.T) {
	e := start(t, extproc.Options{})
	threeDeployments(e)
	rs, err := e.exchange(context.Background(), reqHeaders("GET", "/v1/models", true, duplex, "x-gateway-destination-endpoint", "169.254.169.254:80"))
	if err != nil {
		t.Fatal(err)
	}
	c := rs[0].GetRequestHeaders().GetResponse()
	if got := c.GetHeaderMutation().GetRemoveHeaders(); len(got) != 1 || got[0] != "x-gateway-destination-endpoint" || !c.GetClearRouteCache() {
		t.Fatalf("GET with a destination header answered %v, want it removed", rs[0])
	}
	rs, err = e.exchange(context.Background(), reqHeaders("POST", "/v1/chat/completions", false, duplex, "x-gateway-destination-endpoint", "169.254.169.254:80"),
		reqBody(chatBody("llama", 100, 1), true))
	if err != nil {
		t.Fatal(err)
	}
	if d := decisionOf(t, rs); !strings.HasPrefix(d.header, "10.0.0.") {
		t.Fatalf("destination %q, want a pool instance (set with OVERWRITE_IF_EXISTS_OR_ADD)", d.header)
	}
}

// TestResponsePhases: trailers and the response path pass through, and a
// served endpoint other than the chosen one is counted.
func TestResponsePhases(t *testing.T) {
	e := start(t, extproc.Options{Fallbacks: 2})
	threeDeployments(e)
	trailers := &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestTrailers{RequestTrailers: &extprocv3.HttpTrailers{}}}
	respTrailers := &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseTrailers{ResponseTrailers: &extprocv3.HttpTrailers{}}}
	body := chatBody("llama", 1000, 7)
	// The body ends with trailers, not end_of_stream; the served endpoint is
	// one no pick chose.
	rs, err := e.exchange(context.Background(), reqHeaders("POST", "/v1/chat/completions", false, duplex), reqBody(body, false), trailers,
		respHeaders("10.9.9.9:1"), respBody([]byte("data: x\n\n"), false), respBody([]byte("data: [DONE]\n\n"), true), respTrailers)
	if err != nil {
		t.Fatal(err)
	}
	d := decisionOf(t, rs)
	if !bytes.Equal(d.body, body) || d.eos {
		t.Fatalf("body back %d bytes, eos %v; want %d bytes without eos (trailers follow)", len(d.body), d.eos, len(body))
	}
	var kinds []string
	for _, r := range rs {
		_, kind, _ := strings.Cut(fmt.Sprintf("%T", r.GetResponse()), "ProcessingResponse_")
		kinds = append(kinds, kind)
	}
	want := "RequestHeaders RequestBody RequestTrailers ResponseHeaders ResponseBody ResponseBody ResponseTrailers"
	if got := strings.Join(kinds, " "); got != want {
		t.Fatalf("responses %s\nwant      %s", got, want)
	}
	// A request served where it was sent, or with no served endpoint
	// reported, is not a mismatch.
	for _, served := range []string{"", "chosen"} {
		st, err := e.ext.Process(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		send(t, st, reqHeaders("POST", "/v1/chat/completions", false, duplex))
		send(t, st, reqBody(chatBody("llama", 500, len(served)), true))
		r, err := st.Recv()
		if err != nil {
			t.Fatal(err)
		}
		chosen, _, _ := strings.Cut(decisionOf(t, []*extprocv3.ProcessingResponse{r}).header, ",")
		if _, err := st.Recv(); err != nil { // the body
			t.Fatal(err)
		}
		if served == "chosen" {
			served = chosen
		}
		send(t, st, respHeaders(served))
		if _, err := st.Recv(); err != nil {
			t.Fatal(err)
		}
		st.CloseSend()
		if _, err := st.Recv(); err == nil {
			t.Fatal("the stream did not end after CloseSend")
		}
	}
	fams := e.scrape()
	if got := counter(fams, "prefixroute_extproc_served_mismatch_total", map[string]string{"pool": "llama"}); got != 1 {
		t.Fatalf("served mismatches %v, want 1", got)
	}
}

func TestHealth(t *testing.T) {
	e := start(t, extproc.Options{})
	hc := grpc_health_v1.NewHealthClient(e.cc)
	for _, svc := range []string{"", "envoy.service.ext_proc.v3.ExternalProcessor"} {
		r, err := hc.Check(context.Background(), &grpc_health_v1.HealthCheckRequest{Service: svc})
		if err != nil || r.GetStatus() != grpc_health_v1.HealthCheckResponse_SERVING {
			t.Fatalf("health of %q: %v, %v", svc, r, err)
		}
	}
	if _, err := hc.Check(context.Background(), &grpc_health_v1.HealthCheckRequest{Service: "prefixroute.v1.PickService"}); err == nil {
		t.Fatal("the front end's health answers for PickService, which it does not serve")
	}
}
