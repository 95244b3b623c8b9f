package server_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/daemon"
	"github.com/prefixroute/prefixroute/internal/servertest"
)

// benchEnv starts a daemon with n idle instances over deps deployments, each
// holding (through cache events) a shared 32-block system prefix, and returns
// a function that sends every instance a fresh report on its stream.
func benchEnv(b *testing.B, n, deps int) (*servertest.Sidecar, []uint64, func()) {
	e := servertest.Start(b)
	shared := make([]uint64, 32)
	for i := range shared {
		shared[i] = uint64(1_000_000 + i)
	}
	ins := make([]*instance, n)
	reports := make([]*pb.ReportLoadRequest, n)
	for i := range n {
		r := rep("m", fmt.Sprintf("d%02d", i%deps), fmt.Sprintf("i%04d", i))
		r.ReportsCacheEvents, r.StoredBlockHashes = true, shared
		ins[i] = report(e, r)
		r.StoredBlockHashes = nil
		reports[i] = r
	}
	refresh := func() {
		for i, in := range ins {
			in.send(reports[i])
		}
	}
	hashes := make([]uint64, 256)
	copy(hashes, shared)
	for i := 32; i < len(hashes); i++ {
		hashes[i] = uint64(i)
	}
	return e, hashes, refresh
}

// BenchmarkPickVsEmptyCall measures Pick over gRPC on loopback against the
// health check (an empty unary call) on the same connection, interleaved so
// both see the same machine, and reports their ratio.
func BenchmarkPickVsEmptyCall(b *testing.B) {
	for _, size := range []struct {
		n, deps int
		audit   pb.AuditLevel
	}{
		{8, 2, pb.AuditLevel_AUDIT_LEVEL_FULL}, {64, 2, pb.AuditLevel_AUDIT_LEVEL_FULL}, {1000, 16, pb.AuditLevel_AUDIT_LEVEL_FULL},
		{8, 2, pb.AuditLevel_AUDIT_LEVEL_NONE}, {64, 2, pb.AuditLevel_AUDIT_LEVEL_NONE}, {1000, 16, pb.AuditLevel_AUDIT_LEVEL_NONE},
	} {
		name := fmt.Sprintf("instances=%d/deployments=%d/audit=%s", size.n, size.deps, size.audit.String()[len("AUDIT_LEVEL_"):])
		b.Run(name, func(b *testing.B) {
			e, hashes, refresh := benchEnv(b, size.n, size.deps)
			health := healthpb.NewHealthClient(e.Conn)
			bg := context.Background()
			req := &pb.PickRequest{Pool: "m", PrefixHashes: hashes, PromptTokens: 4096, Audit: size.audit}
			var pickDur, emptyDur time.Duration
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				t0 := time.Now()
				if _, err := health.Check(bg, &healthpb.HealthCheckRequest{}); err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				if _, err := e.Pick.Pick(bg, req); err != nil {
					b.Fatal(err)
				}
				pickDur += time.Since(t1)
				emptyDur += t1.Sub(t0)
				if i%100 == 99 {
					// Reports reset the optimistic accounting, as live instances would.
					b.StopTimer()
					refresh()
					b.StartTimer()
				}
			}
			n := float64(b.N)
			b.ReportMetric(float64(pickDur.Nanoseconds())/n, "pick-ns/op")
			b.ReportMetric(float64(emptyDur.Nanoseconds())/n, "empty-ns/op")
			b.ReportMetric(float64(pickDur)/float64(emptyDur), "pick/empty")
		})
	}
}

// BenchmarkReportIngest measures load reports applied per second over one
// ReportLoad stream, sending and receiving acks concurrently.
func BenchmarkReportIngest(b *testing.B) {
	for _, events := range []int{0, 64} {
		b.Run(fmt.Sprintf("events=%d", events), func(b *testing.B) {
			// No per-stream rate limit: this measures how fast the router
			// can apply reports, not the limit.
			e := servertest.Start(b, servertest.Config(func(c *daemon.Config) { c.Transport.ReportsPerSecond, c.Transport.ReportBurst = 1e9, 1e9 }))
			stream, err := e.Load.ReportLoad(context.Background())
			if err != nil {
				b.Fatal(err)
			}
			m := rep("m", "d", "a")
			m.ReportsCacheEvents = true
			done := make(chan error, 1)
			b.ResetTimer()
			start := time.Now()
			go func() {
				for range b.N {
					if _, err := stream.Recv(); err != nil {
						done <- err
						return
					}
				}
				done <- nil
			}()
			for i := range b.N {
				m.Seq = uint64(i + 1)
				m.StoredBlockHashes = m.StoredBlockHashes[:0]
				for k := range events {
					m.StoredBlockHashes = append(m.StoredBlockHashes, uint64(i*events+k))
				}
				if err := stream.Send(m); err != nil {
					b.Fatal(err)
				}
			}
			if err := <-done; err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "reports/s")
			stream.CloseSend()
		})
	}
}
