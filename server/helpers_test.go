package server_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/internal/servertest"
)

// instance is one open ReportLoad stream.
type instance struct {
	t      testing.TB
	stream grpc.BidiStreamingClient[pb.ReportLoadRequest, pb.ReportLoadResponse]
	cancel context.CancelFunc
	seq    uint64
}

// report opens a stream to e for the instance named by first and waits for
// the first ack, so the report is applied when it returns.
func report(e *servertest.Sidecar, first *pb.ReportLoadRequest) *instance {
	e.T.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	stream, err := e.Load.ReportLoad(ctx)
	if err != nil {
		cancel()
		e.T.Fatal(err)
	}
	in := &instance{t: e.T, stream: stream, cancel: cancel}
	e.T.Cleanup(in.close)
	in.send(first)
	return in
}

// send sends one report and waits for its ack.
func (in *instance) send(m *pb.ReportLoadRequest) {
	in.t.Helper()
	if err := in.trySend(m); err != nil {
		in.t.Fatalf("report: %v", err)
	}
}

// trySend sends one report and returns the error instead of an ack.
func (in *instance) trySend(m *pb.ReportLoadRequest) error {
	in.seq++
	m.Seq = in.seq
	if err := in.stream.Send(m); err != nil {
		_, err = in.stream.Recv()
		return err
	}
	ack, err := in.stream.Recv()
	if err != nil {
		return err
	}
	if ack.GetSeq() != in.seq {
		in.t.Fatalf("ack seq %d, want %d", ack.GetSeq(), in.seq)
	}
	return nil
}

// close ends the stream cleanly and waits until the server saw it.
func (in *instance) close() {
	if in.cancel == nil {
		return
	}
	in.stream.CloseSend()
	for {
		if _, err := in.stream.Recv(); err != nil {
			break
		}
	}
	in.cancel()
	in.cancel = nil
}

// rep is a load report with the identity set and everything else idle.
func rep(pool, dep, id string) *pb.ReportLoadRequest {
	return &pb.ReportLoadRequest{Pool: pool, Deployment: dep, InstanceId: id, Address: id + ":8000",
		PrefillTokensPerSecond: 10000, KvCapacityBlocks: 1000}
}

func f64(v float64) *float64 { return &v }
func u64(v uint64) *uint64   { return &v }

// wantCode fails unless err is a status with code c whose message contains
// every one of parts.
func wantCode(t *testing.T, err error, c codes.Code, parts ...string) {
	t.Helper()
	st, _ := status.FromError(err)
	if st.Code() != c {
		t.Fatalf("code %v (%v), want %v", st.Code(), err, c)
	}
	for _, p := range parts {
		if !strings.Contains(st.Message(), p) {
			t.Errorf("message %q does not mention %q", st.Message(), p)
		}
	}
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func filepathTemp() (string, error) { return os.MkdirTemp("", "prefixrouted-test-") }

func writeFile(path, s string) error { return os.WriteFile(path, []byte(s), 0o600) }

func readFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	return string(b), err
}
