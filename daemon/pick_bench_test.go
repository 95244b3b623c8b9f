package daemon

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/durationpb"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/server"
)

// BenchmarkPickGRPC measures a whole Pick over loopback gRPC: against a
// bare grpc.Server with the services registered (middleware=off), and
// against the daemon (middleware=on: otelgrpc stats handler, logging,
// observer, recovery, with tracing off as by default).
func BenchmarkPickGRPC(b *testing.B) {
	for _, mw := range []bool{false, true} {
		b.Run(fmt.Sprintf("middleware=%v", map[bool]string{false: "off", true: "on"}[mw]), func(b *testing.B) {
			var s *server.Server
			var addr string
			if mw {
				d, err := Start(Config{Listen: "127.0.0.1:0", HTTPListen: "off",
					Server: server.Options{DataDir: b.TempDir(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}})
				if err != nil {
					b.Fatal(err)
				}
				defer func() {
					if err := d.Shutdown(context.Background()); err != nil {
						b.Errorf("Shutdown: %v", err)
					}
				}()
				s, addr = d.Server(), d.Addr()
			} else {
				var err error
				if s, err = server.New(server.Options{DataDir: b.TempDir(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}); err != nil {
					b.Fatal(err)
				}
				defer func() {
					if err := s.Close(); err != nil {
						b.Errorf("Server.Close: %v", err)
					}
				}()
				lis, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					b.Fatal(err)
				}
				gs := grpc.NewServer()
				s.Register(gs)
				go func() {
					if err := gs.Serve(lis); err != nil {
						b.Errorf("Serve: %v", err)
					}
				}()
				defer gs.Stop()
				addr = lis.Addr().String()
			}
			cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				b.Fatal(err)
			}
			defer cc.Close()
			freshInstance(b, s, cc)
			client := pb.NewPickServiceClient(cc)
			h := make([]uint64, 32)
			for i := range h {
				h[i] = uint64(i + 1)
			}
			seed := uint64(1)
			req := &pb.PickRequest{Pool: "bench", PrefixHashes: h, PromptTokens: 512, Seed: &seed}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := client.Pick(context.Background(), req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// freshInstance gives pool "bench" of s one instance, i of deployment d,
// that stays fresh for an hour: a policy set in process, one report over
// cc acked.
func freshInstance(b *testing.B, s *server.Server, cc *grpc.ClientConn) {
	b.Helper()
	ctx := context.Background()
	if _, err := s.Admin().SetPolicy(ctx, &pb.SetPolicyRequest{AllowNewPool: true, Pool: "bench",
		Policy: &pb.Policy{StaleAfter: durationpb.New(time.Hour), ForgetAfter: durationpb.New(time.Hour)}}); err != nil {
		b.Fatal(err)
	}
	st, err := pb.NewLoadServiceClient(cc).ReportLoad(ctx)
	if err != nil {
		b.Fatal(err)
	}
	if err := st.Send(&pb.ReportLoadRequest{Pool: "bench", Deployment: "d", InstanceId: "i", Address: "10.0.0.1:1",
		Seq: 1, PrefillTokensPerSecond: 10000}); err != nil {
		b.Fatal(err)
	}
	if _, err := st.Recv(); err != nil {
		b.Fatalf("the report's ack: %v", err)
	}
}
