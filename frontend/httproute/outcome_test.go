package httproute_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/daemon"
	"github.com/prefixroute/prefixroute/frontend/httproute"
	"github.com/prefixroute/prefixroute/internal/servertest"
)

// TestHTTPOutcomeExcludes: a connect_failed posted to /v1/outcome (in
// protobuf JSON, enum by name) keeps the instance out of the next picks,
// and the answer counts it.
func TestHTTPOutcomeExcludes(t *testing.T) {
	e := servertest.Start(t)
	report(e, rep("m", "a", "a-1"))
	report(e, rep("m", "b", "b-1"))
	a := post(t, e.D, httproute.PathOutcome, `{"outcomes":[{"pool":"m","request_id":"r-1","instance_id":"a-1","status":"OUTCOME_STATUS_CONNECT_FAILED"}]}`, nil)
	if a.status != http.StatusOK || a.header.Get("Content-Type") != "application/json" || string(a.body) != `{"accepted":1}` {
		t.Fatalf("status %d %q: %s, want 200 {\"accepted\":1}", a.status, a.header.Get("Content-Type"), a.body)
	}
	for i := range 20 {
		seed := uint64(i)
		resp, err := e.Pick.Pick(ctx(t), &pb.PickRequest{Pool: "m", Seed: &seed})
		if err != nil {
			t.Fatal(err)
		}
		if resp.GetInstanceId() != "b-1" {
			t.Fatalf("pick %d chose %s after its connect failed", i, resp.GetInstanceId())
		}
	}
}

// TestHTTPOutcomeErrors: every bad body gets a precise 400 (413 over the
// limit) with a google.rpc.Status JSON body naming what was wrong.
func TestHTTPOutcomeErrors(t *testing.T) {
	e := servertest.Start(t, servertest.Config(func(c *daemon.Config) { c.MaxRecvMsgBytes = 4096 }))
	report(e, rep("m", "a", "a-1"))
	for _, tc := range []struct {
		name, body string
		status     int
		msg        string
	}{
		{"not JSON", `outcomes`, 400, "body is not a ReportOutcomeRequest in protobuf JSON"},
		{"unknown field", `{"outcomes":[],"extra":1}`, 400, `unknown field "extra"`},
		{"wrong type", `{"outcomes":{"pool":"m"}}`, 400, "body is not a ReportOutcomeRequest"},
		{"unknown status name", `{"outcomes":[{"pool":"m","instance_id":"a-1","status":"GONE"}]}`, 400, "GONE"},
		{"empty", `{}`, 400, "outcomes is empty"},
		{"unspecified", `{"outcomes":[{"pool":"m","instance_id":"a-1"}]}`, 400, "outcomes[0].status is unspecified"},
		{"no instance", `{"outcomes":[{"pool":"m","status":"OUTCOME_STATUS_SERVED"}]}`, 400, "outcomes[0].instance_id is empty"},
		{"negative ttft", `{"outcomes":[{"pool":"m","instance_id":"a-1","status":1,"ttft_ms":-3}]}`, 400, "outcomes[0].ttft_ms is -3"},
		{"too large", `{"outcomes":[` + strings.Repeat(`{"pool":"m","instance_id":"a-1","status":1},`, 200) + `]}`, 413, "the limit is 4096 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := post(t, e.D, httproute.PathOutcome, tc.body, nil)
			var st rpcStatus
			if err := json.Unmarshal(a.body, &st); err != nil {
				t.Fatalf("status %d, body %q: %v", a.status, a.body, err)
			}
			if a.status != tc.status || !strings.Contains(st.Message, tc.msg) {
				t.Errorf("status %d %q, want %d with %q", a.status, st.Message, tc.status, tc.msg)
			}
		})
	}
}
