package httproute_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/internal/gateway"
	"github.com/prefixroute/prefixroute/internal/servertest"
)

// TestHTTPRouteSLO: the x-slo-ttft-ms header sets the pick's target on
// /v1/route: a bad value is 400 bad_request naming the header, a target no
// instance meets under on_slo_miss shed is 429 slo_unattainable with the
// best predicted TTFT, one it meets routes; /v1/pick takes ttft_slo_ms in
// its JSON body and answers the shed with the status's ErrorInfo.
func TestHTTPRouteSLO(t *testing.T) {
	e := servertest.Start(t)
	r := rep("chat", "a", "a-1")
	q := 100.0
	r.QueueMs = &q
	report(e, r)
	if _, err := e.Admin.SetPolicy(ctx(t), &pb.SetPolicyRequest{Pool: "chat", Policy: &pb.Policy{OnSloMiss: pb.SloOnMiss_SLO_ON_MISS_SHED}}); err != nil {
		t.Fatal(err)
	}
	withSLO := func(v string) http.Header {
		h := routeHeader("/v1/chat/completions")
		h.Set(gateway.SLOHeader, v)
		return h
	}
	for _, tc := range []struct {
		value  string
		status int
		reason string
		msg    string
	}{
		{"-1", 400, gateway.ReasonBadRequest, `x-slo-ttft-ms is "-1": want a decimal number of ms in (0, 3600000]`},
		{"0", 400, gateway.ReasonBadRequest, `x-slo-ttft-ms is "0": want a number of ms in (0, 3600000]`},
		{"50", 429, gateway.ReasonSLOUnattainable, `cannot meet ttft_slo_ms 50: the best predicted TTFT of an eligible instance is`},
	} {
		a := post(t, e.D, "/v1/route", chatBody("chat", "hello"), withSLO(tc.value))
		var body openAIError
		if err := json.Unmarshal(a.body, &body); err != nil {
			t.Fatalf("%s: status %d, body %q: %v", tc.value, a.status, a.body, err)
		}
		if a.status != tc.status || a.header.Get(gateway.ReasonHeader) != tc.reason || !strings.Contains(body.Error.Message, tc.msg) {
			t.Errorf("%s: status %d, reason %q, body %s; want %d %s mentioning %q", tc.value, a.status,
				a.header.Get(gateway.ReasonHeader), a.body, tc.status, tc.reason, tc.msg)
		}
	}
	if a := post(t, e.D, "/v1/route", chatBody("chat", "hello"), withSLO("5000")); a.status != http.StatusNoContent {
		t.Errorf("a target of 5000 ms: status %d, body %s", a.status, a.body)
	}
	a := post(t, e.D, "/v1/pick", `{"pool":"chat","prompt_tokens":16,"ttft_slo_ms":50}`, nil)
	if a.status != http.StatusTooManyRequests || !strings.Contains(string(a.body), `"reason":"SLO_UNATTAINABLE"`) ||
		!strings.Contains(string(a.body), `"best_predicted_ttft_ms":"101.9`) {
		t.Errorf("/v1/pick: status %d, body %s", a.status, a.body)
	}
}
