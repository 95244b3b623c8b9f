package server_test

import (
	"context"
	"fmt"
	"testing"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
)

// BenchmarkReportOutcome measures the server's side of ReportOutcome
// (Server.OutcomesFor, without the transport) per call of 64 outcomes of a
// 64-instance pool, each with a request_id matched in the pick book and a
// ttft: served (the common case: read lock only) and connect_failed (the
// write lock, exclusions). ns/outcome is ns/op / 64; allocs/op is per call
// (the response), none per outcome.
func BenchmarkReportOutcome(b *testing.B) {
	for _, st := range []pb.OutcomeStatus{served, connectFailed} {
		b.Run(fmt.Sprintf("outcomes=64/status=%s", st.String()[len("OUTCOME_STATUS_"):]), func(b *testing.B) {
			e, _, _ := benchEnv(b, 64, 4)
			srv := e.D.Server()
			bg := context.Background()
			req := &pb.ReportOutcomeRequest{}
			for i := range 64 {
				id := fmt.Sprintf("req-%d", i)
				resp, err := e.Pick.Pick(bg, &pb.PickRequest{Pool: "m", RequestId: id, PromptTokens: 100, Audit: pb.AuditLevel_AUDIT_LEVEL_NONE})
				if err != nil {
					b.Fatal(err)
				}
				req.Outcomes = append(req.Outcomes, &pb.Outcome{Pool: "m", RequestId: id, InstanceId: resp.GetInstanceId(), Status: st, TtftMs: f64(float64(50 + i))})
			}
			b.ReportAllocs()
			for b.Loop() {
				resp, err := srv.OutcomesFor(bg, req)
				if err != nil {
					b.Fatal(err)
				}
				if resp.GetMatched() != 64 {
					b.Fatalf("matched %d, want 64", resp.GetMatched())
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(req.Outcomes)), "ns/outcome")
		})
	}
}
