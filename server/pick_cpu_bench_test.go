package server_test

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
)

// processCPU returns the process's user + system CPU time (getrusage).
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkPickCPU measures CPU per call rather than latency: blocks of
// 100 health checks (an empty unary call) alternate with blocks of 100
// Picks on the same connection, and each block's process CPU time
// (getrusage: client and daemon together, both in this process) is divided
// by its calls. 64 instances in 4 deployments, a 64-block prefix (the
// issue's setup); reports every 10 blocks reset the optimistic accounting
// (untimed, uncounted).
func BenchmarkPickCPU(b *testing.B) {
	for _, audit := range []pb.AuditLevel{pb.AuditLevel_AUDIT_LEVEL_NONE, pb.AuditLevel_AUDIT_LEVEL_CHOSEN, pb.AuditLevel_AUDIT_LEVEL_FULL} {
		b.Run(fmt.Sprintf("instances=64/deployments=4/audit=%s", audit.String()[len("AUDIT_LEVEL_"):]), func(b *testing.B) {
			e, hashes, refresh := benchEnv(b, 64, 4)
			health := healthpb.NewHealthClient(e.Conn)
			bg := context.Background()
			req := &pb.PickRequest{Pool: "m", PrefixHashes: hashes[:64], PromptTokens: 1024, Audit: audit}
			var emptyCPU, pickCPU time.Duration
			calls := 0
			for i := 0; b.Loop(); i++ {
				c0 := processCPU(b)
				for range 100 {
					if _, err := health.Check(bg, &healthpb.HealthCheckRequest{}); err != nil {
						b.Fatal(err)
					}
				}
				c1 := processCPU(b)
				for range 100 {
					if _, err := e.Pick.Pick(bg, req); err != nil {
						b.Fatal(err)
					}
				}
				c2 := processCPU(b)
				emptyCPU += c1 - c0
				pickCPU += c2 - c1
				calls += 100
				if i%10 == 9 {
					b.StopTimer()
					refresh()
					b.StartTimer()
				}
			}
			b.ReportMetric(float64(emptyCPU.Nanoseconds())/float64(calls), "empty-cpu-ns/call")
			b.ReportMetric(float64(pickCPU.Nanoseconds())/float64(calls), "pick-cpu-ns/call")
			b.ReportMetric(float64(pickCPU)/float64(emptyCPU), "pick/empty-cpu")
		})
	}
}
