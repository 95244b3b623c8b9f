package daemon_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/daemon"
	"github.com/prefixroute/prefixroute/server"
)

// Example starts a daemon on loopback, has one instance report its load,
// and picks an instance for a request.
func Example() {
	dir, err := os.MkdirTemp("", "prefixroute-example")
	if err != nil {
		panic(err)
	}
	defer func() {
		if err := os.RemoveAll(dir); err != nil {
			panic(err)
		}
	}()
	d, err := daemon.Start(daemon.Config{
		Listen: "127.0.0.1:0", HTTPListen: "off",
		Server: server.Options{DataDir: dir, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))},
	})
	if err != nil {
		panic(err)
	}
	defer func() {
		if err := d.Shutdown(context.Background()); err != nil {
			panic(err)
		}
	}()

	cc, err := grpc.NewClient(d.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		panic(err)
	}
	defer cc.Close()
	ctx := context.Background()

	// An instance opens its report stream; the first report names it.
	stream, err := pb.NewLoadServiceClient(cc).ReportLoad(ctx)
	if err != nil {
		panic(err)
	}
	if err := stream.Send(&pb.ReportLoadRequest{Pool: "chat", Deployment: "llama-a", InstanceId: "a-0",
		Address: "10.0.0.1:8000", Seq: 1, PrefillTokensPerSecond: 10000}); err != nil {
		panic(err)
	}
	if _, err := stream.Recv(); err != nil { // the ack: the report is applied
		panic(err)
	}

	// A gateway asks where a request should go.
	resp, err := pb.NewPickServiceClient(cc).Pick(ctx, &pb.PickRequest{Pool: "chat", PrefixHashes: []uint64{11, 12}, PromptTokens: 32})
	if err != nil {
		panic(err)
	}
	fmt.Println(resp.GetAddress(), resp.GetDeployment(), resp.GetInstanceId())
	// Output: 10.0.0.1:8000 llama-a a-0
}
