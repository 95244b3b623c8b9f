package replica

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/internal/cluster"
)

// TestOnEventsWarnsOncePerBadEvent: every event of a batch that cannot be
// applied is logged once ("cluster event not applied", with its own
// error), and the events after it are applied without a warning. A bad
// report used to leave its error behind for the Closed and Assigned
// events that followed it in the batch, which were logged as not applied
// with the report's error.
func TestOnEventsWarnsOncePerBadEvent(t *testing.T) {
	good := &pb.ClusterEvent{Event: &pb.ClusterEvent_Report{Report: &pb.ReportLoadRequest{
		Pool: "chat", Deployment: "a", InstanceId: "y", Address: "10.0.0.2:8000", Seq: 1}}}
	bad := &pb.ClusterEvent{Event: &pb.ClusterEvent_Report{Report: &pb.ReportLoadRequest{
		Pool: "chat", Deployment: "a", Address: "10.0.0.3:8000", Seq: 1}}} // no instance_id
	closed := &pb.ClusterEvent{Event: &pb.ClusterEvent_Closed{Closed: &pb.InstanceClosed{InstanceId: "x"}}}
	assigned := &pb.ClusterEvent{Event: &pb.ClusterEvent_Assigned{Assigned: &pb.PickAssigned{InstanceId: "x", PrefillTokens: 10}}}
	for _, tc := range []struct {
		name     string
		batch    []*pb.ClusterEvent
		warnings int
	}{
		{"bad report, then closed and assigned", []*pb.ClusterEvent{bad, closed, assigned}, 1},
		{"closed, bad report, assigned", []*pb.ClusterEvent{closed, bad, assigned}, 1},
		{"two bad reports", []*pb.ClusterEvent{bad, bad, closed}, 2},
		{"bad report, then a good one", []*pb.ClusterEvent{bad, good}, 1},
		{"all good", []*pb.ClusterEvent{good, closed, assigned}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs bytes.Buffer
			r, err := New(newHost(t), Options{Cluster: cluster.Config{URLs: []string{"nats://127.0.0.1:1"}, Name: "r1"},
				Logger: slog.New(slog.NewJSONHandler(&logs, nil)), Now: frozenNow})
			if err != nil {
				t.Fatal(err)
			}
			var payloads [][]byte
			for _, ev := range tc.batch {
				data, err := proto.Marshal(ev)
				if err != nil {
					t.Fatal(err)
				}
				payloads = append(payloads, data)
			}
			r.onEvents("chat", "r2", frozen, payloads)

			var warned []string
			for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
				var rec struct{ Msg, Error string }
				if line == "" || json.Unmarshal([]byte(line), &rec) != nil || rec.Msg != "cluster event not applied" {
					continue
				}
				warned = append(warned, rec.Error)
				if !strings.Contains(rec.Error, "instance_id is empty") {
					t.Errorf("warning with error %q, want the bad report's (instance_id is empty)", rec.Error)
				}
			}
			if len(warned) != tc.warnings {
				t.Errorf("%d warnings %q, want %d; logs:\n%s", len(warned), warned, tc.warnings, logs.String())
			}
			if slices.Contains(tc.batch, good) {
				if p, err := r.h.Registry().Pool("chat"); err != nil || len(p.Instances(frozen)) != 1 {
					t.Errorf("the good report's instance y is not in the pool (%v)", err)
				}
			}
			if got := r.applied.Load(); got != uint64(len(tc.batch)) {
				t.Errorf("%d events counted applied, want %d", got, len(tc.batch))
			}
		})
	}
}
