package server_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"

	"github.com/prefixroute/prefixroute/daemon"
	"github.com/prefixroute/prefixroute/server"
)

// openSilent opens n streams as who that send nothing, on either RPC, and
// returns the status each got within wait (OK: still open and waiting).
func (e *takeoverEnv) openSilent(who string, n int, batch bool, wait time.Duration) []codes.Code {
	e.t.Helper()
	got := make(chan codes.Code, n)
	for range n {
		ctx, cancel := context.WithCancel(e.as(who))
		e.t.Cleanup(cancel)
		var recv func() error
		if batch {
			st, err := e.sc.Load.ReportLoadBatch(ctx)
			if err != nil {
				e.t.Fatal(err)
			}
			recv = func() error { _, err := st.Recv(); return err }
		} else {
			st, err := e.sc.Load.ReportLoad(ctx)
			if err != nil {
				e.t.Fatal(err)
			}
			recv = func() error { _, err := st.Recv(); return err }
		}
		go func() { got <- status.Code(recv()) }()
	}
	var codes []codes.Code
	deadline := time.After(wait)
	for range n {
		select {
		case c := <-got:
			codes = append(codes, c)
		case <-deadline:
			return codes
		}
	}
	return codes
}

// TestSilentStreamsStayInsideTheIdentity is the review's F3 at the edge:
// an identity bound to one instance opens more report streams than
// --max-report-streams and sends nothing. Its silent streams take no slot
// of the daemon (only MaxFirstReportWaits of its own; more are refused),
// so another identity's instances still connect.
func TestSilentStreamsStayInsideTheIdentity(t *testing.T) {
	for _, batch := range []bool{false, true} {
		t.Run(map[bool]string{false: "ReportLoad", true: "ReportLoadBatch"}[batch], func(t *testing.T) {
			e := startTakeover(t, func(c *daemon.Config) {
				c.Transport.MaxReportStreams, c.Transport.FirstReportTimeout = 4, time.Minute
			})
			refused := e.openSilent("inst-pa-a1", server.MaxFirstReportWaits+3, batch, 2*time.Second)
			if len(refused) != 3 {
				t.Fatalf("%d of %d silent streams ended (%v), want the 3 over MaxFirstReportWaits",
					len(refused), server.MaxFirstReportWaits+3, refused)
			}
			for _, c := range refused {
				if c != codes.ResourceExhausted {
					t.Fatalf("a silent stream over the identity's cap ended %v, want ResourceExhausted", c)
				}
			}
			// Its damage stays with it: its own next stream waits for its
			// silent ones to end; another identity's instances connect.
			if _, err := e.report("inst-pa-a1", "a", "a-1"); status.Code(err) != codes.ResourceExhausted {
				t.Fatalf("the silent identity's own instance: %v, want ResourceExhausted", err)
			}
			for _, inst := range []string{"b-1", "b-2", "b-3", "b-4"} {
				if _, err := e.report("inst-pb", "b", inst); err != nil {
					t.Fatalf("%s with the slots free: %v", inst, err)
				}
			}
			// The daemon-wide limit still holds once streams report.
			if _, err := e.report("inst-pb", "b", "b-5"); status.Code(err) != codes.ResourceExhausted {
				t.Fatalf("fifth reporting stream with 4 slots: %v, want ResourceExhausted", err)
			}
		})
	}
}

// TestBatchFirstMessageBinding: a bound identity's ReportLoadBatch stream
// takes its slot with a first message that reports inside the binding;
// one with no such report is refused whole (PermissionDenied), while a
// report outside the binding next to one inside ends that instance alone.
func TestBatchFirstMessageBinding(t *testing.T) {
	rep := func(dep, inst string) *pb.ReportLoadRequest {
		return &pb.ReportLoadRequest{Pool: "P", Deployment: dep, InstanceId: inst, Address: inst + ":8000", Seq: 1}
	}
	for _, tc := range []struct {
		name    string
		reports []*pb.ReportLoadRequest
		stream  codes.Code // of the stream's first Recv
		ended   []string   // instances ended in the first response
	}{
		{"inside", []*pb.ReportLoadRequest{rep("a", "a-1")}, codes.OK, nil},
		{"inside and outside", []*pb.ReportLoadRequest{rep("b", "b-1"), rep("a", "a-1")}, codes.OK, []string{"b-1"}},
		{"outside only", []*pb.ReportLoadRequest{rep("b", "b-1")}, codes.PermissionDenied, nil},
		{"no report", nil, codes.PermissionDenied, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := startTakeover(t, nil)
			st, err := e.sc.Load.ReportLoadBatch(e.as("inst-pa"))
			if err != nil {
				t.Fatal(err)
			}
			if err := st.Send(&pb.ReportLoadBatchRequest{Reports: tc.reports}); err != nil {
				t.Fatal(err)
			}
			r, err := st.Recv()
			if status.Code(err) != tc.stream {
				t.Fatalf("first response: %v, want %v", err, tc.stream)
			}
			var ended []string
			for _, end := range r.GetEnded() {
				ended = append(ended, end.GetInstance().GetInstanceId())
			}
			if len(ended) != len(tc.ended) || (len(ended) > 0 && ended[0] != tc.ended[0]) {
				t.Fatalf("ended %q, want %q", ended, tc.ended)
			}
		})
	}
}
