package httproute_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/frontend"
	"github.com/prefixroute/prefixroute/internal/servertest"
)

// TestRouteFlowHeaders: /v1/route reads the fairness id (and its alias)
// and the priority header into the pick: on a saturated pool under
// on_saturation queue, a sheddable priority is refused at once with 429
// and a queued one times out naming its flow and band; a bad priority is
// a 400 naming the header.
func TestRouteFlowHeaders(t *testing.T) {
	e := servertest.Start(t)
	if _, err := e.Admin.SetPolicy(ctx(t), &pb.SetPolicyRequest{AllowNewPool: true, Pool: "chat", Policy: &pb.Policy{
		OnSaturation: pb.OnSaturation_ON_SATURATION_QUEUE, QueueTtl: durationpb.New(10 * time.Millisecond)}}); err != nil {
		t.Fatal(err)
	}
	r := rep("chat", "a", "a-1")
	r.KvCacheUsage = 0.99
	report(e, r)
	for _, tc := range []struct {
		name    string
		headers map[string]string
		status  int
		want    []string
	}{
		{"sheddable", map[string]string{frontend.PriorityHeader: "-1", frontend.FairnessIDHeader: "t1"}, http.StatusTooManyRequests,
			[]string{"sheddable_rejected", "priority -1"}},
		{"fairness id", map[string]string{frontend.PriorityHeader: " 7 ", frontend.FairnessIDHeader: "tenant-a", frontend.FairnessIDAliasHeader: "ignored"},
			http.StatusTooManyRequests, []string{"queue_timeout", "priority 7", `flow \"tenant-a\"`}},
		{"alias", map[string]string{frontend.FairnessIDAliasHeader: "tenant-b"}, http.StatusTooManyRequests,
			[]string{"queue_timeout", "priority 0", `flow \"tenant-b\"`}},
		{"no headers: the default flow", nil, http.StatusTooManyRequests, []string{`flow \"default\"`}},
		{"priority not a number", map[string]string{frontend.PriorityHeader: "high"}, http.StatusBadRequest,
			[]string{frontend.PriorityHeader + ` is \"high\"`}},
		{"priority over int32", map[string]string{frontend.PriorityHeader: "2147483648"}, http.StatusBadRequest, []string{frontend.PriorityHeader}},
		{"flow id of 129 bytes", map[string]string{frontend.FairnessIDHeader: strings.Repeat("f", 129)}, http.StatusBadRequest,
			[]string{"129 bytes; at most 128"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := routeHeader("/v1/chat/completions")
			for k, v := range tc.headers {
				h.Set(k, v)
			}
			a := post(t, e.D, "/v1/route", chatBody("chat", "hello"), h)
			if a.status != tc.status {
				t.Fatalf("status %d, want %d; body %s", a.status, tc.status, a.body)
			}
			for _, w := range tc.want {
				if !strings.Contains(string(a.body), w) {
					t.Errorf("body %s does not mention %s", a.body, w)
				}
			}
		})
	}
}
