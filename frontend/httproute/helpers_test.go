package httproute_test

import (
	"context"
	"testing"
	"time"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/internal/servertest"
)

func TestMain(m *testing.M) { servertest.VerifyNoLeaks(m) }

// report opens a ReportLoad stream to e for the instance first names and
// waits for the ack of its first report, so the instance is known when it
// returns. The stream ends with the test.
func report(e *servertest.Sidecar, first *pb.ReportLoadRequest) {
	e.T.Helper()
	sctx, cancel := context.WithCancel(context.Background())
	e.T.Cleanup(cancel)
	stream, err := e.Load.ReportLoad(sctx)
	if err != nil {
		e.T.Fatal(err)
	}
	first.Seq = 1
	if err := stream.Send(first); err != nil {
		e.T.Fatalf("report: %v", err)
	}
	if ack, err := stream.Recv(); err != nil || ack.GetSeq() != 1 {
		e.T.Fatalf("ack %v, %v; want seq 1", ack, err)
	}
}

// rep is the first report of an instance of pool and deployment dep,
// listening on id:8000.
func rep(pool, dep, id string) *pb.ReportLoadRequest {
	return &pb.ReportLoadRequest{Pool: pool, Deployment: dep, InstanceId: id, Address: id + ":8000",
		PrefillTokensPerSecond: 10000, KvCapacityBlocks: 1000}
}

// ctx is a context the test's calls run with, bounded by 30 s.
func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}
