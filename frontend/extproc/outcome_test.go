package extproc_test

import (
	"context"
	"strings"
	"testing"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/frontend/extproc"
	"github.com/prefixroute/prefixroute/internal/servertest"
)

// withStatus sets a response_headers message's :status.
func withStatus(m *extprocv3.ProcessingRequest, code string) *extprocv3.ProcessingRequest {
	m.GetResponseHeaders().GetHeaders().GetHeaders()[0].RawValue = []byte(code)
	return m
}

// TestExtprocReportsOutcome: the ext_proc server reports each routed
// request's outcome itself, kept with its pick by x-request-id: served
// with the ttft to the first response body chunk, or upstream_error (a
// 5xx) on the endpoint the gateway says served it (a fallback here),
// reported when the stream ends as no body came; counted per pool and
// status.
func TestExtprocReportsOutcome(t *testing.T) {
	e := start(t, extproc.Options{Fallbacks: 2})
	threeDeployments(e)
	ids := map[string]string{"10.0.0.1:8000": "b1", "10.0.0.2:8000": "g1", "10.0.0.3:8000": "r1"}
	for _, tc := range []struct {
		name, reqID, status string
		served              string // the endpoint the gateway reports; "": none (the chosen one)
		body                bool
		want                pb.OutcomeStatus
	}{
		{"served, with a body", "ok-1", "200", "", true, pb.OutcomeStatus_OUTCOME_STATUS_SERVED},
		{"5xx on another endpoint, no body", "err-1", "503", "10.0.0.3:8000", false, pb.OutcomeStatus_OUTCOME_STATUS_UPSTREAM_ERROR},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msgs := []*extprocv3.ProcessingRequest{reqHeaders("POST", "/v1/chat/completions", false, duplex, "x-request-id", tc.reqID),
				reqBody(chatBody("llama", 2<<10, 7), true), withStatus(respHeaders(tc.served), tc.status)}
			if tc.body {
				msgs = append(msgs, respBody([]byte(`{"id":"x"}`), true))
			}
			rs, err := e.exchange(context.Background(), msgs...)
			if err != nil {
				t.Fatal(err)
			}
			got := strings.Split(decisionOf(t, rs).header, ",")[0]
			served := tc.served
			if served == "" {
				served = got
			}
			po, ok := e.sc.D.Server().PickOutcome(tc.reqID)
			switch {
			case !ok:
				t.Fatalf("PickOutcome(%s): no pick kept", tc.reqID)
			case !po.Reported || po.Status != tc.want || po.Tried != ids[served] || po.HasTTFT != tc.body || po.Instance != ids[got]:
				t.Errorf("PickOutcome(%s) = %+v; want %v on %s (chosen %s), ttft %v", tc.reqID, po, tc.want, ids[served], ids[got], tc.body)
			}
		})
	}
	fams := e.sc.Metrics()
	for _, st := range []string{"served", "upstream_error"} {
		if v, _ := servertest.MetricValue(fams, "prefixroute_outcomes_total", map[string]string{"pool": "llama", "status": st}); v != 1 {
			t.Errorf("prefixroute_outcomes_total{pool=llama,status=%s} = %v, want 1", st, v)
		}
	}
}
