package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/internal/testwait"
	"github.com/prefixroute/prefixroute/server"
)

// TestReportLoadBatch: each instance of a batch stream is a ReportLoad
// stream of its own: opened by its first report, acked by seq, ended alone
// by a bad report, a newer stream or closed, and opened again by its next
// report; the clean end of the stream disconnects them all.
func TestReportLoadBatch(t *testing.T) {
	d := obsStart(t, nil)
	_, load, admin := obsClients(t, d)
	b := openBatch(t, load)

	acks, ended := b.exchange(batch(brep("chat", "a", 1, true), brep("chat", "b", 1, true), brep("code", "c", 7, true)))
	same(t, "acks of the first message", acks, []string{"chat/a:1", "chat/b:1", "code/c:7"})
	same(t, "ends", ended, nil)
	same(t, "chat's instances", instanceStates(t, admin, "chat"), []string{"a=OK", "b=OK"})
	// Counted under their pools, which the first reports created.
	fams := obsScrape(t, d)
	for pool, want := range map[string]float64{"chat": 2, "code": 1} {
		if v, ok := obsValueOK(fams, "prefixroute_reports_total", map[string]string{"pool": pool, "deployment": "d"}); !ok || v != want {
			t.Errorf("prefixroute_reports_total{pool=%q}: %v (found %v), want %v", pool, v, ok, want)
		}
	}

	acks, _ = b.exchange(batch(brep("chat", "a", 2, false), brep("chat", "b", 2, false)))
	same(t, "acks", acks, []string{"chat/a:2", "chat/b:2"})

	// A seq going back ends a alone, after b's ack in the same answer.
	acks, ended = b.exchange(batch(brep("chat", "a", 1, false), brep("chat", "b", 3, false)))
	same(t, "acks", acks, []string{"chat/b:3"})
	same(t, "ends", ended, []string{"chat/a=InvalidArgument"})
	same(t, "chat's instances", instanceStates(t, admin, "chat"), []string{"a=DISCONNECTED", "b=OK"})
	// A later report without the identity cannot open a again...
	acks, ended = b.exchange(batch(brep("chat", "a", 5, false)))
	same(t, "ends", ended, []string{"chat/a=InvalidArgument"})
	same(t, "acks", acks, nil)
	// ...its first report does.
	acks, _ = b.exchange(batch(brep("chat", "a", 1, true)))
	same(t, "acks", acks, []string{"chat/a:1"})

	// A ReportLoad stream of b replaces b on the batch stream.
	single := obsConnect(t, load)
	if err := single.stream.Send(ident("chat", "d", "b")); err != nil {
		t.Fatal(err)
	}
	if _, err := single.stream.Recv(); err != nil {
		t.Fatal(err)
	}
	acks, ended = b.exchange(batch(brep("chat", "a", 2, false), brep("chat", "b", 4, false)))
	same(t, "acks", acks, []string{"chat/a:2"})
	same(t, "ends", ended, []string{"chat/b=Aborted"})

	// closed acks what was applied, then ends the instance with OK.
	acks, ended = b.exchange(&pb.ReportLoadBatchRequest{Reports: []*pb.ReportLoadRequest{brep("code", "c", 8, false)},
		Closed: []*pb.InstanceRef{{Pool: "code", InstanceId: "c"}, {Pool: "code", InstanceId: "never-opened"}}})
	same(t, "acks", acks, []string{"code/c:8"})
	same(t, "ends", ended, []string{"code/c=OK"})
	same(t, "code's instances", instanceStates(t, admin, "code"), []string{"c=DISCONNECTED"})

	if acks, err := b.end(); err != nil || len(acks) != 0 {
		t.Fatalf("clean end: acks %q, %v", acks, err)
	}
	testwait.Eventually(t, "a disconnected after the batch stream's end, b still on its own stream", func() bool {
		got := instanceStates(t, admin, "chat")
		slices.Sort(got)
		return slices.Equal(got, []string{"a=DISCONNECTED", "b=OK"})
	})
}

// TestReportLoadBatchAckInterval: with ack_interval_ms the first message is
// acked at once, later ones by one cumulative ack, flushed by the clean end.
func TestReportLoadBatchAckInterval(t *testing.T) {
	d := obsStart(t, nil)
	_, load, _ := obsClients(t, d)
	b := openBatch(t, load)
	m := batch(brep("chat", "a", 1, true), brep("chat", "b", 1, true))
	m.AckIntervalMs = server.MaxAckIntervalMs
	acks, _ := b.exchange(m)
	same(t, "first acks", acks, []string{"chat/a:1", "chat/b:1"})
	for seq := uint64(2); seq <= 4; seq++ {
		if err := b.st.Send(batch(brep("chat", "a", seq, false), brep("chat", "b", seq, false))); err != nil {
			t.Fatal(err)
		}
	}
	// A new instance is acked at once, with what is pending.
	acks, _ = b.exchange(batch(brep("chat", "c", 1, true)))
	same(t, "acks with a new instance", acks, []string{"chat/a:4", "chat/b:4", "chat/c:1"})
	if err := b.st.Send(batch(brep("chat", "a", 5, false))); err != nil {
		t.Fatal(err)
	}
	acks, err := b.end()
	if err != nil {
		t.Fatal(err)
	}
	same(t, "acks at the end", acks, []string{"chat/a:5"})
}

// TestReportLoadBatchRefused: what ends the whole stream, each with its
// code and a message naming the fault.
func TestReportLoadBatchRefused(t *testing.T) {
	d := obsStart(t, nil)
	_, load, _ := obsClients(t, d)
	over := batch()
	for i := range server.MaxBatchReports + 1 {
		over.Reports = append(over.Reports, brep("chat", fmt.Sprint("i", i), 1, true))
	}
	tests := []struct {
		name string
		msgs []*pb.ReportLoadBatchRequest
		code codes.Code
		msg  string
	}{
		{"too many reports", []*pb.ReportLoadBatchRequest{over}, codes.InvalidArgument, "257 reports: the limit is 256"},
		{"no pool", []*pb.ReportLoadBatchRequest{batch(brep("", "a", 1, true))}, codes.InvalidArgument, "has no pool or instance_id"},
		{"no instance, later", []*pb.ReportLoadBatchRequest{batch(brep("chat", "a", 1, true)), batch(brep("chat", "", 2, false))},
			codes.InvalidArgument, "report 0 (seq 2) has no pool or instance_id"},
		{"ack interval", []*pb.ReportLoadBatchRequest{{Reports: []*pb.ReportLoadRequest{brep("chat", "a", 1, true)}, AckIntervalMs: server.MaxAckIntervalMs + 1}},
			codes.InvalidArgument, "first message of a stream: ack_interval_ms 60001 is above the limit 60000"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := openBatch(t, load)
			var err error
			for _, m := range tc.msgs {
				if err = b.st.Send(m); err != nil {
					break
				}
			}
			for err == nil {
				_, err = b.st.Recv()
			}
			if status.Code(err) != tc.code || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("got %v, want %v with %q", err, tc.code, tc.msg)
			}
		})
	}
}

// TestReportLoadBatchLimits: each batched instance holds one of
// MaxReportStreams and has its own token bucket; over either, that
// instance ends with ResourceExhausted and the others go on.
func TestReportLoadBatchLimits(t *testing.T) {
	d := obsStart(t, func(c *Config) {
		c.Transport.MaxReportStreams, c.Transport.ReportsPerSecond, c.Transport.ReportBurst = 3, 1, 4
	})
	_, load, _ := obsClients(t, d)
	b := openBatch(t, load) // holds one
	acks, ended := b.exchange(batch(brep("chat", "a", 1, true), brep("chat", "b", 1, true), brep("chat", "c", 1, true)))
	same(t, "acks", acks, []string{"chat/a:1", "chat/b:1"})
	same(t, "ends", ended, []string{"chat/c=ResourceExhausted"})

	// a spends its burst of 4 (the first report took one); b reports once.
	var got []string
	for seq := uint64(2); seq <= 5; seq++ {
		m := batch(brep("chat", "a", seq, false))
		if seq == 5 {
			m.Reports = append(m.Reports, brep("chat", "b", 2, false))
		}
		_, e := b.exchange(m)
		got = append(got, e...)
	}
	same(t, "ends", got, []string{"chat/a=ResourceExhausted"})
	// a's slot is free again: c can join.
	acks, _ = b.exchange(batch(brep("chat", "c", 1, true)))
	same(t, "acks", acks, []string{"chat/c:1"})
}

// TestReportLoadBatchEdges: a message of server.MaxBatchReports reports and a
// stream of server.MaxBatchInstances instances pass; one more instance ends alone.
func TestReportLoadBatchEdges(t *testing.T) {
	d := obsStart(t, nil)
	_, load, _ := obsClients(t, d)
	b := openBatch(t, load)
	var want []string
	for n := 0; n < server.MaxBatchInstances; n += server.MaxBatchReports {
		m := batch()
		for i := n; i < n+server.MaxBatchReports; i++ {
			m.Reports = append(m.Reports, brep("chat", fmt.Sprint("i", i), 1, true))
		}
		acks, ended := b.exchange(m)
		if len(acks) != server.MaxBatchReports || len(ended) != 0 {
			t.Fatalf("message of %d first reports: %d acks, ends %q", server.MaxBatchReports, len(acks), ended)
		}
		want = append(want, acks...)
	}
	acks, ended := b.exchange(batch(brep("chat", "one-more", 1, true), brep("chat", "i0", 2, false)))
	same(t, "acks", acks, []string{"chat/i0:2"})
	same(t, "ends", ended, []string{"chat/one-more=ResourceExhausted"})
	if len(want) != server.MaxBatchInstances {
		t.Fatalf("%d instances acked, want %d", len(want), server.MaxBatchInstances)
	}
}

// TestReportBurstDefault: with the default limits a stream may send a
// backlog of 500 reports at once (what a router that fell behind reads
// after a stall) without being ended; DefaultReportBurst is 1000.
func TestReportBurstDefault(t *testing.T) {
	d := obsStart(t, nil)
	_, load, _ := obsClients(t, d)
	st := obsConnect(t, load).stream
	const n = 500
	for seq := uint64(1); seq <= n; seq++ {
		m := &pb.ReportLoadRequest{Seq: seq, PrefillTokensPerSecond: 1000}
		if seq == 1 {
			m = ident("chat", "a", "a-1")
		}
		if err := st.Send(m); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.CloseSend(); err != nil {
		t.Fatal(err)
	}
	var last uint64
	for {
		a, err := st.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("after ack %d: %v", last, err)
		}
		last = a.GetSeq()
	}
	if last != n {
		t.Fatalf("last ack %d, want %d", last, n)
	}
}

// batchConn is one ReportLoadBatch stream of a test.
type batchConn struct {
	t  *testing.T
	st pb.LoadService_ReportLoadBatchClient
}

func openBatch(t *testing.T, load pb.LoadServiceClient) *batchConn {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	st, err := load.ReportLoadBatch(ctx)
	if err != nil {
		t.Fatalf("ReportLoadBatch: %v", err)
	}
	return &batchConn{t: t, st: st}
}

// exchange sends m and returns the response it gets, as "pool/inst:seq"
// acks and "pool/inst=Code" ends.
func (b *batchConn) exchange(m *pb.ReportLoadBatchRequest) (acks, ended []string) {
	b.t.Helper()
	if err := b.st.Send(m); err != nil {
		b.t.Fatalf("send: %v", err)
	}
	r, err := b.st.Recv()
	if err != nil {
		b.t.Fatalf("recv: %v", err)
	}
	return describe(r)
}

func describe(r *pb.ReportLoadBatchResponse) (acks, ended []string) {
	for _, a := range r.GetAcks() {
		acks = append(acks, fmt.Sprintf("%s/%s:%d", a.GetInstance().GetPool(), a.GetInstance().GetInstanceId(), a.GetAck().GetSeq()))
	}
	for _, e := range r.GetEnded() {
		ended = append(ended, fmt.Sprintf("%s/%s=%v", e.GetInstance().GetPool(), e.GetInstance().GetInstanceId(), codes.Code(e.GetCode())))
	}
	return acks, ended
}

// end closes the stream and returns its status after the remaining acks.
func (b *batchConn) end() (acks []string, err error) {
	if err := b.st.CloseSend(); err != nil {
		b.t.Fatal(err)
	}
	for {
		r, err := b.st.Recv()
		if errors.Is(err, io.EOF) {
			return acks, nil
		}
		if err != nil {
			return acks, err
		}
		a, _ := describe(r)
		acks = append(acks, a...)
	}
}

// brep is a later report of pool/inst; first adds the identity.
func brep(pool, inst string, seq uint64, first bool) *pb.ReportLoadRequest {
	r := &pb.ReportLoadRequest{Pool: pool, InstanceId: inst, Seq: seq, PrefillTokensPerSecond: 1000}
	if first {
		r.Deployment, r.Address = "d", inst+":8000"
	}
	return r
}

func batch(reports ...*pb.ReportLoadRequest) *pb.ReportLoadBatchRequest {
	return &pb.ReportLoadBatchRequest{Reports: reports}
}

func same(t *testing.T, what string, got, want []string) {
	t.Helper()
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("%s = %q, want %q", what, got, want)
	}
}

// instanceStates returns pool's instances as "inst=STATE".
func instanceStates(t *testing.T, admin pb.AdminServiceClient, pool string) []string {
	t.Helper()
	r, err := admin.ListInstances(context.Background(), &pb.ListInstancesRequest{Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, in := range r.GetInstances() {
		out = append(out, in.GetInstanceId()+"="+strings.TrimPrefix(in.GetState().String(), "INSTANCE_STATE_"))
	}
	return out
}
