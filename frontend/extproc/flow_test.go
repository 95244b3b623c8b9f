package extproc_test

import (
	"context"
	"testing"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/protobuf/types/known/durationpb"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/frontend"
	"github.com/prefixroute/prefixroute/frontend/extproc"
)

// TestFlowHeaders: ext_proc reads the fairness id (or its alias) and the
// priority header into the pick; on a saturated pool under on_saturation
// queue the 429 names them; a bad priority is a 400 naming the header.
func TestFlowHeaders(t *testing.T) {
	e := start(t, extproc.Options{})
	e.instance("full", "blue", "f1", "10.0.2.1:8000", 1) // KV cache full
	if _, err := e.sc.Admin.SetPolicy(context.Background(), &pb.SetPolicyRequest{AllowNewPool: true, Pool: "full",
		Policy: &pb.Policy{OnSaturation: pb.OnSaturation_ON_SATURATION_QUEUE, QueueTtl: durationpb.New(10 * time.Millisecond)}}); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name   string
		kv     []string
		status int
		reason string
		msg    string
	}{
		{"sheddable", []string{frontend.PriorityHeader, "-2"}, 429, "saturated", "sheddable_rejected: priority -2 is sheddable"},
		{"fairness id", []string{frontend.FairnessIDHeader, "tenant-a", frontend.PriorityHeader, "4"}, 429, "saturated", `queue_timeout (priority 4, flow "tenant-a"`},
		{"alias", []string{frontend.FairnessIDAliasHeader, "tenant-b"}, 429, "saturated", `flow "tenant-b"`},
		{"bad priority", []string{frontend.PriorityHeader, "1e3"}, 400, "bad_request", frontend.PriorityHeader + ` is "1e3"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			msgs := append([]*extprocv3.ProcessingRequest{reqHeaders("POST", "/v1/chat/completions", false, duplex, tt.kv...)},
				chunked(chatBody("full", 200, 1), 1<<20)...)
			rs, err := e.exchange(context.Background(), msgs...)
			if err != nil {
				t.Fatal(err)
			}
			checkImmediate(t, rs, tt.status, tt.reason, tt.msg)
		})
	}
}
