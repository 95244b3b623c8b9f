package server_test

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/daemon"
	"github.com/prefixroute/prefixroute/internal/testwait"
)

// TestEmptyBatchStreamEnds is issue 32's last gap: a ReportLoadBatch
// stream whose instances were all taken over, or all closed, gives back
// its slot of --max-report-streams without its client's help. A taken-over
// instance ends at once (Aborted, not at its next report); the empty stream
// ends with FailedPrecondition naming --first-report-timeout, no sooner
// than that timeout after its last instance left.
func TestEmptyBatchStreamEnds(t *testing.T) {
	const idle = 400 * time.Millisecond
	for _, tc := range []struct {
		name  string
		ended codes.Code // the instance's end
		slots int64      // held once the batch stream ended
	}{
		{"taken over", codes.Aborted, 1}, // the ReportLoad stream that took it over
		{"closed", codes.OK, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := startTakeover(t, func(c *daemon.Config) { c.Transport.FirstReportTimeout = idle })
			srv := e.sc.D.Server()
			st, err := e.sc.Load.ReportLoadBatch(e.as("inst-pa"))
			if err != nil {
				t.Fatal(err)
			}
			r := &pb.ReportLoadRequest{Pool: "P", Deployment: "a", InstanceId: "a-1", Address: "a-1:8000", Seq: 1}
			if err := st.Send(&pb.ReportLoadBatchRequest{Reports: []*pb.ReportLoadRequest{r}}); err != nil {
				t.Fatal(err)
			}
			if resp, err := st.Recv(); err != nil || len(resp.GetAcks()) != 1 {
				t.Fatalf("first response %v, %v; want the ack of a-1", resp, err)
			}
			if n := srv.OpenReportStreams(); n != 2 {
				t.Fatalf("%d slots held by a batch stream of one instance, want 2", n)
			}
			left := time.Now()
			if tc.ended == codes.Aborted {
				if _, err := e.report("inst-pa", "a", "a-1"); err != nil {
					t.Fatalf("takeover by a ReportLoad stream: %v", err)
				}
			} else if err := st.Send(&pb.ReportLoadBatchRequest{Closed: []*pb.InstanceRef{{Pool: "P", InstanceId: "a-1"}}}); err != nil {
				t.Fatal(err)
			}
			resp, err := st.Recv()
			if err != nil || len(resp.GetEnded()) != 1 || codes.Code(resp.GetEnded()[0].GetCode()) != tc.ended {
				t.Fatalf("after the instance left: %v, %v; want its end with %v", resp, err, tc.ended)
			}
			_, err = st.Recv()
			if status.Code(err) != codes.FailedPrecondition || !strings.Contains(status.Convert(err).Message(), "--first-report-timeout") {
				t.Fatalf("the empty stream ended with %v, want FailedPrecondition naming --first-report-timeout", err)
			}
			if d := time.Since(left); d < idle {
				t.Fatalf("the empty stream ended %v after its last instance left, before the %v timeout", d, idle)
			}
			testwait.Eventually(t, "the batch stream's slots", func() bool { return srv.OpenReportStreams() == tc.slots })
		})
	}
}
