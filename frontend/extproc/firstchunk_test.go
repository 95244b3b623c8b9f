package extproc_test

import (
	"context"
	"testing"

	procmode "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/prefixroute/prefixroute/frontend/extproc"
)

// TestExtprocFirstResponseChunkOnly: with response_body_mode STREAMED (as
// deploy/envoy/envoy.yaml sets it) the Processor answers the first
// response body chunk, reports the outcome with its ttft, and ends the
// stream cleanly, so that Envoy streams the rest of the answer without it
// (an SSE answer is one chunk per token); in FULL_DUPLEX_STREAMED, where
// Envoy keeps no copy of the body, it echoes every chunk. The client is
// go-control-plane's, sending what Envoy sends. Before, STREAMED kept the
// stream open and answered every chunk.
func TestExtprocFirstResponseChunkOnly(t *testing.T) {
	e := start(t, extproc.Options{Fallbacks: 2})
	threeDeployments(e)
	for _, tc := range []struct {
		name       string
		respMode   procmode.ProcessingMode_BodySendMode
		wantBodies int // response_body answers
		wantEcho   string
	}{
		{"STREAMED: the first chunk, then a clean end", procmode.ProcessingMode_STREAMED, 1, ""},
		{"FULL_DUPLEX_STREAMED: every chunk echoed", duplex, 3, "data: a\n\ndata: b\n\ndata: [DONE]\n\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reqID := "first-chunk-" + tc.respMode.String()
			hs := reqHeaders("POST", "/v1/chat/completions", false, duplex, "x-request-id", reqID)
			hs.ProtocolConfig.ResponseBodyMode = tc.respMode
			rs, err := e.exchange(context.Background(), hs, reqBody(chatBody("llama", 2<<10, 7), true), respHeaders(""),
				respBody([]byte("data: a\n\n"), false), respBody([]byte("data: b\n\n"), false), respBody([]byte("data: [DONE]\n\n"), true))
			if err != nil {
				t.Fatalf("the stream ended with %v, want a clean end", err)
			}
			bodies, echo := 0, ""
			for _, r := range rs {
				if b := r.GetResponseBody(); b != nil {
					bodies++
					echo += string(b.GetResponse().GetBodyMutation().GetStreamedResponse().GetBody())
				}
			}
			if _, ok := rs[len(rs)-1].GetResponse().(*extprocv3.ProcessingResponse_ResponseBody); !ok || bodies != tc.wantBodies || echo != tc.wantEcho {
				t.Fatalf("%d response_body answers echoing %q, last %T; want %d echoing %q, the last answer a response_body",
					bodies, echo, rs[len(rs)-1].GetResponse(), tc.wantBodies, tc.wantEcho)
			}
			if po, ok := e.sc.D.Server().PickOutcome(reqID); !ok || !po.Reported || !po.HasTTFT {
				t.Errorf("PickOutcome(%s) = %+v, %v; want reported with a ttft", reqID, po, ok)
			}
		})
	}
}
