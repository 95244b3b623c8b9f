package server

import (
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

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

// TestReportAckInterval runs streams with ack_interval_ms against a real
// daemon: acks are cumulative, a deferred one comes by the timer, the
// clean end and an error flush what was applied, and the limit holds.
func TestReportAckInterval(t *testing.T) {
	d := obsStart(t, nil)
	_, load, _ := obsClients(t, d)
	first := func(inst string, ms uint32) *pb.ReportLoadRequest {
		return &pb.ReportLoadRequest{Pool: "p", Deployment: "d", InstanceId: inst, Address: "10.0.0.1:8000", Seq: 1, AckIntervalMs: ms}
	}
	// acks reads acks until the stream ends and returns their seqs and the end.
	acks := func(st pb.LoadService_ReportLoadClient) ([]uint64, error) {
		var seqs []uint64
		for {
			a, err := st.Recv()
			if err != nil {
				if errors.Is(err, io.EOF) {
					err = nil
				}
				return seqs, err
			}
			seqs = append(seqs, a.GetSeq())
		}
	}

	t.Run("cumulative, flushed at the clean end", func(t *testing.T) {
		st := obsConnect(t, load).stream
		for seq := uint64(1); seq <= 5; seq++ {
			m := &pb.ReportLoadRequest{Seq: seq}
			if seq == 1 {
				m = first("i1", MaxAckIntervalMs)
			}
			if err := st.Send(m); err != nil {
				t.Fatal(err)
			}
		}
		if err := st.CloseSend(); err != nil {
			t.Fatal(err)
		}
		seqs, err := acks(st)
		if err != nil || !slices.Equal(seqs, []uint64{1, 5}) {
			t.Fatalf("acks %v, end %v; want [1 5] and OK (the first at once, the rest in one ack at the end)", seqs, err)
		}
	})

	t.Run("a deferred ack comes without another report", func(t *testing.T) {
		st := obsConnect(t, load).stream
		if err := st.Send(first("i2", 20)); err != nil {
			t.Fatal(err)
		}
		if a, err := st.Recv(); err != nil || a.GetSeq() != 1 {
			t.Fatalf("first ack %v, %v", a, err)
		}
		if err := st.Send(&pb.ReportLoadRequest{Seq: 2}); err != nil {
			t.Fatal(err)
		}
		if a, err := st.Recv(); err != nil || a.GetSeq() != 2 {
			t.Fatalf("deferred ack %v, %v; want seq 2 within the interval", a, err)
		}
	})

	t.Run("an error comes after the acks of what was applied", func(t *testing.T) {
		st := obsConnect(t, load).stream
		for _, m := range []*pb.ReportLoadRequest{first("i3", MaxAckIntervalMs), {Seq: 2}, {Seq: 1}} {
			if err := st.Send(m); err != nil {
				break
			}
		}
		seqs, err := acks(st)
		if !slices.Equal(seqs, []uint64{1, 2}) || status.Code(err) != codes.InvalidArgument ||
			!strings.Contains(err.Error(), "report seq 1 is below the stream's last seq 2") {
			t.Fatalf("acks %v, end %v; want [1 2] then InvalidArgument naming seq 1 below 2", seqs, err)
		}
	})

	t.Run("the limit", func(t *testing.T) {
		err := reportErr(t, load, first("i4", MaxAckIntervalMs+1))
		want := "first report of a stream: ack_interval_ms 60001 is above the limit 60000 (one ack a minute)"
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), want) {
			t.Fatalf("got %v, want InvalidArgument %q", err, want)
		}
		if err := reportErr(t, load, first("i5", MaxAckIntervalMs)); err != nil {
			t.Fatalf("ack_interval_ms at the limit: %v", err)
		}
	})
}
