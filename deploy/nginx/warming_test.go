package nginx

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/internal/gateway"
)

// TestNginxSidecarErrorFailOpen: the sidecar's own 5xx (here 503
// pool_warming: a configured pool none of whose instances has reported
// yet) fails open to the static list when fail-open is on, and with it
// off reaches the client as the sidecar sent it, Retry-After included.
// Before the fix, fail-open on answered the client twice (the sidecar's
// 503, then the upstream's answer: nginx "[alert] header already sent")
// and fail-open off sent no answer of its own (500).
func TestNginxSidecarErrorFailOpen(t *testing.T) {
	for _, tc := range []struct {
		name     string
		failOpen bool
	}{
		{"fail-open on: static list", true},
		{"fail-open off: the sidecar's 503 with Retry-After", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, _, ids := startStaticFleet(t, tc.failOpen, nil)
			if _, err := f.sidecar.Admin.SetWeights(context.Background(), &pb.SetWeightsRequest{Pool: "warm",
				Weights: map[string]float64{"d": 1}, AllowNewPool: true}); err != nil {
				t.Fatal(err)
			}
			body := chat("warm", longPrompt, "question", false)
			// The sidecar's own answer, for the record.
			if a := f.route(body); a.status != http.StatusServiceUnavailable || a.header.Get(gateway.ReasonHeader) != gateway.ReasonPoolWarming {
				t.Fatalf("/v1/route for a configured pool without instances: %d %v %s, want 503 pool_warming", a.status, a.header, a.body)
			}
			a := f.send(body)
			if tc.failOpen {
				wantStatic(t, f, a, staticRank(t, ids, body)[0])
				return
			}
			var e struct {
				Error struct{ Message, Type, Code string }
			}
			if err := json.Unmarshal([]byte(a.body), &e); err != nil || a.status != http.StatusServiceUnavailable ||
				e.Error.Code != gateway.ReasonPoolWarming || a.header.Get(gateway.ReasonHeader) != gateway.ReasonPoolWarming ||
				a.header.Get(gateway.RetryAfterHeader) != "1" || a.header.Get(fallbackHeader) != "" {
				t.Fatalf("fail-open off, pool warming: %d %v %s (%v); want 503 pool_warming, Retry-After: 1", a.status, a.header, a.body, err)
			}
		})
	}
}
