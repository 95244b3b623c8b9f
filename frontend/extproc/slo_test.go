package extproc_test

import (
	"context"
	"testing"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/frontend/extproc"
	"github.com/prefixroute/prefixroute/internal/gateway"
)

// TestSLOHeader: ext_proc reads x-slo-ttft-ms: a bad value is a 400
// bad_request naming the header, a target no instance meets under
// on_slo_miss shed a 429 slo_unattainable with the best predicted TTFT,
// and one it meets is routed.
func TestSLOHeader(t *testing.T) {
	e := start(t, extproc.Options{Fallbacks: 1})
	e.report(&pb.ReportLoadRequest{Pool: "llama", Deployment: "blue", InstanceId: "b1", Address: "10.0.0.1:8000", Seq: 1,
		KvCapacityBlocks: 10000, PrefillTokensPerSecond: 10000, BlockSizeTokens: 16, QueueMs: ptr(200.0)})
	if _, err := e.sc.Admin.SetPolicy(context.Background(), &pb.SetPolicyRequest{Pool: "llama",
		Policy: &pb.Policy{OnSloMiss: pb.SloOnMiss_SLO_ON_MISS_SHED}}); err != nil {
		t.Fatal(err)
	}
	body := chatBody("llama", 200, 1)
	for _, tt := range []struct {
		value  string
		status int
		reason string
		msg    string
	}{
		{"soon", 400, gateway.ReasonBadRequest, `x-slo-ttft-ms is "soon": want a decimal number of ms in (0, 3600000]`},
		{"9999999", 400, gateway.ReasonBadRequest, `x-slo-ttft-ms is "9999999": want a number of ms in (0, 3600000]`},
		{"100", 429, gateway.ReasonSLOUnattainable, "cannot meet ttft_slo_ms 100: the best predicted TTFT of an eligible instance is 2"},
	} {
		msgs := append([]*extprocv3.ProcessingRequest{reqHeaders("POST", "/v1/chat/completions", false, duplex, gateway.SLOHeader, tt.value)},
			chunked(body, 1<<20)...)
		rs, err := e.exchange(context.Background(), msgs...)
		if err != nil {
			t.Fatal(err)
		}
		checkImmediate(t, rs, tt.status, tt.reason, tt.msg)
	}
	msgs := append([]*extprocv3.ProcessingRequest{reqHeaders("POST", "/v1/chat/completions", false, duplex, gateway.SLOHeader, "1000")},
		chunked(body, 1<<20)...)
	rs, err := e.exchange(context.Background(), msgs...)
	if err != nil {
		t.Fatal(err)
	}
	if ir := rs[len(rs)-1].GetImmediateResponse(); ir != nil {
		t.Fatalf("a target of 1000 ms: immediate response %d %s", ir.GetStatus().GetCode(), ir.GetBody())
	}
}

func ptr[T any](v T) *T { return &v }
