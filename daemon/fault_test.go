package daemon

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"runtime"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/internal/state"
	"github.com/prefixroute/prefixroute/internal/testwait"
)

// Fault tests: streams cut mid-message, streams that never send, a restart
// under 1,000 reconnecting instances (fault_restart_test.go), an unwritable
// or full data dir (fault_disk_test.go). A corrupt state file at start is
// TestCorruptStateRefusesToStart in restart_test.go.

// rawStream is one ReportLoad call written by hand on a raw HTTP/2
// connection, so that a test can stop anywhere inside a gRPC frame.
type rawStream struct {
	conn net.Conn
	fr   *http2.Framer
}

// openRaw sends the HTTP/2 preface, SETTINGS and the HEADERS of a
// ReportLoad call on stream 1; server frames are read and dropped.
func openRaw(t *testing.T, addr string) *rawStream {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if _, err := io.WriteString(conn, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(conn, conn)
	must(t, fr.WriteSettings())
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, h := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":path", pb.LoadService_ReportLoad_FullMethodName},
		{":authority", addr}, {"content-type", "application/grpc"}, {"te", "trailers"}} {
		must(t, enc.WriteField(hpack.HeaderField{Name: h[0], Value: h[1]}))
	}
	must(t, fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes(), EndHeaders: true}))
	// The server's SETTINGS, acks, trailers; the copy ends with the conn.
	go func() { _, _ = io.Copy(io.Discard, conn) }()
	return &rawStream{conn: conn, fr: fr}
}

// grpcFrame is a length-prefixed gRPC message; declared may claim more
// bytes than the message has.
func grpcFrame(msg []byte, declared int) []byte {
	b := make([]byte, 5, 5+len(msg))
	binary.BigEndian.PutUint32(b[1:], uint32(declared))
	return append(b, msg...)
}

// instanceState is the state of one instance, and false when the pool or
// the instance does not exist.
func instanceState(d *Daemon, pool, id string) (state.InstanceState, bool) {
	p, err := d.Server().Registry().Pool(pool)
	if err != nil {
		return 0, false
	}
	for _, in := range p.Instances(time.Now()) {
		if in.Instance == id {
			return in.State, true
		}
	}
	return 0, false
}

// isState reports whether the instance exists in state st.
func isState(d *Daemon, pool, id string, st state.InstanceState) bool {
	got, ok := instanceState(d, pool, id)
	return ok && got == st
}

// TestStreamCutMidMessage: a report stream whose connection is cut in the
// middle of a gRPC frame, before or after its first report, leaves no
// half-applied report: a first report never applied registers nothing, an
// applied one leaves its instance disconnected. The stream's slot is freed
// and the daemon keeps serving.
func TestStreamCutMidMessage(t *testing.T) {
	d := obsStart(t, nil)
	first, _ := proto.Marshal(&pb.ReportLoadRequest{Pool: "chat", Deployment: "a", InstanceId: "a-1", Address: "a-1:1",
		Seq: 1, PrefillTokensPerSecond: 1000})
	second, _ := proto.Marshal(&pb.ReportLoadRequest{Seq: 2, Draining: true, StoredBlockHashes: []uint64{1, 2, 3}})

	// Cut inside the first report: 10 of its bytes, then the connection closes.
	rs := openRaw(t, d.Addr())
	must(t, rs.fr.WriteData(1, false, grpcFrame(first[:10], len(first))))
	testwait.Eventually(t, "the stream to open", func() bool { return d.srv.OpenReportStreams() == 1 })
	rs.conn.Close()
	testwait.Eventually(t, "the cut stream to end", func() bool { return d.srv.OpenReportStreams() == 0 })
	if _, err := d.Server().Registry().Pool("chat"); err == nil {
		t.Fatal("a cut first report created its pool")
	}

	// A full first report, then a second cut after its frame header.
	rs = openRaw(t, d.Addr())
	must(t, rs.fr.WriteData(1, false, grpcFrame(first, len(first))))
	testwait.Eventually(t, "the first report", func() bool { return isState(d, "chat", "a-1", state.StateOK) })
	must(t, rs.fr.WriteData(1, false, grpcFrame(second[:3], len(second))))
	rs.conn.Close()
	testwait.Eventually(t, "the instance to be disconnected", func() bool { return isState(d, "chat", "a-1", state.StateDisconnected) })
	p, _ := d.Server().Registry().Pool("chat")
	if in := p.Instances(time.Now())[0]; in.Last.Draining || in.CachedBlocks != 0 {
		t.Errorf("the cut second report was applied: %+v", in)
	}
	testwait.Eventually(t, "the stream slot", func() bool { return d.srv.OpenReportStreams() == 0 })
	_, _, admin := obsClients(t, d)
	if _, err := admin.ListPools(ctxT(t), &pb.ListPoolsRequest{}); err != nil {
		t.Fatalf("daemon after cut streams: %v", err)
	}
}

// TestSilentStreams: streams that open and never send are closed with
// DeadlineExceeded after FirstReportTimeout while a real instance keeps
// reporting and gateways keep picking; afterwards no stream or goroutine is
// left behind.
func TestSilentStreams(t *testing.T) {
	d := obsStart(t, func(c *Config) { c.Transport.FirstReportTimeout = 300 * time.Millisecond })
	pick, load, _ := obsClients(t, d)
	live := obsConnect(t, load)
	live.report(ident("chat", "a", "a-1"))
	base := runtime.NumGoroutine()

	const silent = 50
	ends := make(chan error, silent)
	for range silent {
		st, err := load.ReportLoad(ctxT(t))
		must(t, err)
		go func() { _, err := st.Recv(); ends <- err }()
	}
	for i := uint64(2); i < 10; i++ {
		live.report(&pb.ReportLoadRequest{})
		if _, err := pick.Pick(ctxT(t), &pb.PickRequest{Pool: "chat", PromptTokens: 10}); err != nil {
			t.Fatalf("pick while silent streams are open: %v", err)
		}
	}
	for range silent {
		select {
		case err := <-ends:
			if status.Code(err) != codes.DeadlineExceeded {
				t.Fatalf("silent stream ended with %v", err)
			}
		case <-time.After(testwait.DefaultTimeout):
			t.Fatalf("a silent stream is still open after %v", testwait.DefaultTimeout)
		}
	}
	testwait.Eventually(t, "only the live stream", func() bool { return d.srv.OpenReportStreams() == 1 })
	testwait.Eventually(t, "the goroutines of the silent streams to end", func() bool { return runtime.NumGoroutine() <= base+5 })
	live.report(&pb.ReportLoadRequest{})
}
