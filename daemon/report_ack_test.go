package daemon

import (
	"errors"
	"io"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/server"
)

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
				m = first("i1", server.MaxAckIntervalMs)
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
		for _, m := range []*pb.ReportLoadRequest{first("i3", server.MaxAckIntervalMs), {Seq: 2}, {Seq: 1}} {
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
		err := reportErr(t, load, first("i4", server.MaxAckIntervalMs+1))
		want := "first report of a stream: ack_interval_ms 60001 is above the limit 60000 (one ack a minute)"
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), want) {
			t.Fatalf("got %v, want InvalidArgument %q", err, want)
		}
		if err := reportErr(t, load, first("i5", server.MaxAckIntervalMs)); err != nil {
			t.Fatalf("ack_interval_ms at the limit: %v", err)
		}
	})
}
