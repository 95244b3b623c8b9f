package report

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/internal/streamtest"
)

func describe(r *pb.ReportLoadBatchResponse) (acks, ended []string) {
	for _, a := range r.GetAcks() {
		acks = append(acks, fmt.Sprintf("%s/%s:%d", a.GetInstance().GetPool(), a.GetInstance().GetInstanceId(), a.GetAck().GetSeq()))
	}
	for _, e := range r.GetEnded() {
		ended = append(ended, fmt.Sprintf("%s/%s=%v", e.GetInstance().GetPool(), e.GetInstance().GetInstanceId(), codes.Code(e.GetCode())))
	}
	return acks, ended
}

func same(t *testing.T, what string, got, want []string) {
	t.Helper()
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("%s = %q, want %q", what, got, want)
	}
}

// TestEngineEmit: an answer acks exactly the members with a report not
// yet acked, one ended since its last ack included, then the ends; a
// member acked already is left out, and with nothing to say nothing is
// sent. The ReportLoad wire sends its one member's ack alone.
func TestEngineEmit(t *testing.T) {
	batch := &streamtest.Stream[pb.ReportLoadBatchRequest, pb.ReportLoadBatchResponse]{}
	single := &streamtest.Stream[pb.ReportLoadRequest, pb.ReportLoadResponse]{}
	s := New(Host{ReportInterval: 100 * time.Millisecond})
	gone := &pb.InstanceEnded{Instance: &pb.InstanceRef{Pool: "chat", InstanceId: "gone"}, Code: int32(codes.OK)}
	tests := []struct {
		name    string
		wire    reportWire
		pending map[string]uint64 // member: ackSeq, in due with a report pending
		acked   []string          // members in due whose reports were acked already
		ended   []*pb.InstanceEnded
		sent    func() int
		want    []string // the answer's acks then ends, nil: nothing sent
	}{
		{"batch: pending and ended", batchWire{batch}, map[string]uint64{"a": 3, "gone": 7}, []string{"b"},
			[]*pb.InstanceEnded{gone}, func() int { return len(batch.Sent()) }, []string{"chat/a:3", "chat/gone:7", "chat/gone=OK"}},
		{"batch: nothing pending", batchWire{batch}, nil, []string{"b"}, nil, func() int { return len(batch.Sent()) }, nil},
		{"single: pending", &singleWire{stream: single}, map[string]uint64{"a": 9}, nil, nil,
			func() int { return len(single.Sent()) }, []string{"seq 9"}},
		{"single: acked already", &singleWire{stream: single}, nil, []string{"a"}, nil, func() int { return len(single.Sent()) }, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := &reportEngine{s: s, wire: tc.wire, members: map[memberKey]*member{}, ended: tc.ended}
			for inst, seq := range tc.pending {
				e.due = append(e.due, &member{key: memberKey{"chat", inst}, ackSeq: seq, pending: true, queued: true})
			}
			for _, inst := range tc.acked {
				e.due = append(e.due, &member{key: memberKey{"chat", inst}, ackSeq: 1, queued: true})
			}
			before := tc.sent()
			if err := e.emit(); err != nil {
				t.Fatal(err)
			}
			if len(e.due) != 0 || e.ended != nil {
				t.Errorf("after emit: %d due, %d ended, want none", len(e.due), len(e.ended))
			}
			if n := tc.sent() - before; tc.want == nil {
				if n != 0 {
					t.Fatalf("%d answers sent, want none", n)
				}
				return
			} else if n != 1 {
				t.Fatalf("%d answers sent, want 1", n)
			}
			var got []string
			if _, ok := tc.wire.(batchWire); ok {
				acks, ends := describe(batch.Sent()[len(batch.Sent())-1])
				got = append(acks, ends...)
			} else {
				got = []string{fmt.Sprintf("seq %d", single.Sent()[len(single.Sent())-1].GetSeq())}
			}
			same(t, "answer", got, tc.want)
		})
	}
}
