package report

import (
	"testing"
	"time"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
)

// TestAckerPacing drives the acker alone: which calls send an ack, with
// which seq. Real time does not matter here: the deferred
// cases use an interval of an hour.
func TestAckerPacing(t *testing.T) {
	type step struct {
		op   string // "apply" (with seq), "flush", "close"
		seq  uint64
		want uint64 // seq of the ack sent; 0: none
	}
	tests := []struct {
		name  string
		every time.Duration
		steps []step
	}{
		{"every report", 0, []step{
			{op: "apply", seq: 1, want: 1}, {op: "apply", seq: 2, want: 2}, {op: "apply", seq: 2, want: 2},
			{op: "flush"}, {op: "close"}}},
		{"deferred", time.Hour, []step{
			{op: "apply", seq: 1, want: 1}, // the first at once
			{op: "apply", seq: 2}, {op: "apply", seq: 3},
			{op: "flush", want: 3}, // one ack covers 2 and 3
			{op: "flush"},          // nothing pending
			{op: "apply", seq: 4}, {op: "close", want: 4}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var sent []*pb.ReportLoadResponse
			var seq uint64
			a := &acker{emit: func() error {
				sent = append(sent, &pb.ReportLoadResponse{Seq: seq, ReportIntervalMs: 100})
				return nil
			}, every: tc.every}
			if tc.every > 0 {
				a.timer = time.NewTimer(tc.every)
				a.timer.Stop()
			}
			for i, st := range tc.steps {
				before := len(sent)
				switch st.op {
				case "apply":
					seq = st.seq
					if err := a.applied(false); err != nil {
						t.Fatal(err)
					}
				case "flush":
					if err := a.flush(); err != nil {
						t.Fatal(err)
					}
				case "close":
					a.close()
				}
				switch got := sent[before:]; {
				case st.want == 0 && len(got) > 0:
					t.Fatalf("step %d (%s %d): sent ack seq %d, want none", i, st.op, st.seq, got[0].GetSeq())
				case st.want != 0 && len(got) != 1:
					t.Fatalf("step %d (%s %d): sent %d acks, want one with seq %d", i, st.op, st.seq, len(got), st.want)
				case st.want != 0 && (got[0].GetSeq() != st.want || got[0].GetReportIntervalMs() != 100):
					t.Fatalf("step %d (%s %d): ack %v, want seq %d interval 100", i, st.op, st.seq, got[0], st.want)
				}
			}
		})
	}
}
