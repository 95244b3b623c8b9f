//go:build unix

package server_test

// Benchmarks of clustering (Options.Cluster, --nats): what a replica pays
// for publishing what it sees and applying what the others publish. The
// numbers and the commands are in BENCHMARKS.md, "Clustering (NATS)".
//
// Every benchmark names its mode as the first sub-benchmark level
// (cluster=off|on), so a run can select one mode with -bench and the runs
// of all can be compared with `benchstat -col /cluster`. "on" is two
// daemons joined through an in-process nats-server with JetStream: r1, the
// one measured, and r2, which receives and applies r1's events, so events
// are really delivered and applied somewhere (both in this process, as is
// the NATS server: allocs/op and cpu-ns/op count all three).

import (
	"context"
	"fmt"
	"testing"
	"time"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/daemon"
	"github.com/prefixroute/prefixroute/internal/testwait"
)

// BenchmarkClusterPick is BenchmarkPickVsEmptyCall with clustering off
// and on: Pick on r1 over gRPC on loopback against an empty unary call
// (the health check) on the same connection, interleaved. When on, every
// pick publishes its assigned work and r2 applies it, and every refresh's
// reports are published and applied too. allocs/op and cpu-ns/op count
// the whole process (client, r1, and when on, r2 and the NATS server).
func BenchmarkClusterPick(b *testing.B) {
	sizes := []struct {
		n, deps int
		audit   pb.AuditLevel
	}{
		{8, 2, pb.AuditLevel_AUDIT_LEVEL_NONE}, {64, 2, pb.AuditLevel_AUDIT_LEVEL_NONE}, {1000, 16, pb.AuditLevel_AUDIT_LEVEL_NONE},
		{8, 2, pb.AuditLevel_AUDIT_LEVEL_FULL}, {64, 2, pb.AuditLevel_AUDIT_LEVEL_FULL}, {1000, 16, pb.AuditLevel_AUDIT_LEVEL_FULL},
	}
	for _, mode := range cbModes {
		b.Run(mode.name, func(b *testing.B) {
			for _, size := range sizes {
				name := fmt.Sprintf("instances=%d/audit=%s", size.n, size.audit.String()[len("AUDIT_LEVEL_"):])
				b.Run(name, func(b *testing.B) {
					r1, _, hashes, refresh := cbPickEnv(b, mode.on, size.n, size.deps)
					health := healthpb.NewHealthClient(r1.Conn)
					bg := context.Background()
					req := &pb.PickRequest{Pool: "m", PrefixHashes: hashes, PromptTokens: 4096, Audit: size.audit}
					var pickDur, emptyDur, cpu time.Duration
					b.ReportAllocs()
					b.ResetTimer()
					cpu0 := cbCPU()
					for i := 0; b.Loop(); i++ {
						t0 := time.Now()
						if _, err := health.Check(bg, &healthpb.HealthCheckRequest{}); err != nil {
							b.Fatal(err)
						}
						t1 := time.Now()
						if _, err := r1.Pick.Pick(bg, req); err != nil {
							b.Fatal(err)
						}
						pickDur += time.Since(t1)
						emptyDur += t1.Sub(t0)
						if i%100 == 99 {
							// Reports reset the optimistic accounting, as
							// live instances would (untimed).
							b.StopTimer()
							cpu += cbCPU() - cpu0
							refresh()
							cpu0 = cbCPU()
							b.StartTimer()
						}
					}
					cpu += cbCPU() - cpu0
					n := float64(b.N)
					b.ReportMetric(float64(pickDur.Nanoseconds())/n, "pick-ns/op")
					b.ReportMetric(float64(emptyDur.Nanoseconds())/n, "empty-ns/op")
					b.ReportMetric(float64(pickDur)/float64(emptyDur), "pick/empty")
					b.ReportMetric(float64(cpu.Nanoseconds())/n, "cpu-ns/op")
				})
			}
		})
	}
}

// cbReport sets m, a report of instance a, to report seq with events new
// block hashes. The hashes are spread over all 64 bits, as real block
// hashes (XXH3) are, so each takes 9-10 bytes as a protobuf varint (small
// sequential numbers, as BenchmarkReportIngest sends, take 1-3).
func cbReport(seq uint64, events int, m *pb.ReportLoadRequest) {
	m.Seq = seq
	m.StoredBlockHashes = m.StoredBlockHashes[:0]
	for k := range events {
		m.StoredBlockHashes = append(m.StoredBlockHashes, cbMix((seq-1)*uint64(events)+uint64(k)))
	}
}

// cbMix is splitmix64's finalizer: distinct inputs, distinct outputs.
func cbMix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// BenchmarkClusterReportIngest is BenchmarkReportIngest with clustering
// off, solo (r1 joined, no peer) and on (r2 applies everything r1
// publishes, on the same 2 cores): load reports applied per second over
// one ReportLoad stream to r1, sending and receiving acks concurrently,
// with 0 or 64 cache events (full 64-bit hashes) per report. When joined,
// every report is published (solo reports wire-B/report and dropped
// too), and when on the
// benchmark then waits (untimed) until r2 shows the last one and reports:
// r2-drain-ms (from the last ack to the last report visible on r2),
// wire-B/report (r1's published framed event bytes per published event:
// Link.Stats PublishedBytes/PublishedEvents as exported on /metrics),
// and dropped (events r1 dropped, and events r2 did not apply).
func BenchmarkClusterReportIngest(b *testing.B) {
	for _, mode := range cbIngestModes {
		b.Run(mode.name, func(b *testing.B) {
			for _, events := range []int{0, 64} {
				b.Run(fmt.Sprintf("events=%d", events), func(b *testing.B) {
					// No per-stream rate limit: this measures how fast the
					// router can apply reports, not the limit.
					r1, r2 := cbStartMode(b, mode, func(c *daemon.Config) {
						c.Transport.ReportsPerSecond, c.Transport.ReportBurst = 1e9, 1e9
					})
					var before, before2 cbCounters
					if mode.on {
						before = cbScrape(b, r1)
					}
					if r2 != nil {
						before2 = cbScrape(b, r2)
					}
					stream, err := r1.Load.ReportLoad(context.Background())
					if err != nil {
						b.Fatal(err)
					}
					m := rep("m", "d", "a")
					m.ReportsCacheEvents = true
					done := make(chan error, 1)
					b.ReportAllocs()
					b.ResetTimer()
					start, cpu0 := time.Now(), cbCPU()
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
						cbReport(uint64(i+1), events, m)
						if err := stream.Send(m); err != nil {
							b.Fatal(err)
						}
					}
					if err := <-done; err != nil {
						b.Fatal(err)
					}
					elapsed, cpu := time.Since(start), cbCPU()-cpu0
					b.StopTimer()
					b.ReportMetric(float64(b.N)/elapsed.Seconds(), "reports/s")
					b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
					switch {
					case r2 != nil:
						acked := time.Now()
						testwait.EventuallyWithin(b, 60*time.Second, "r2 shows the last report", func() bool { return cbLastSeq(r2, "m", "a") >= uint64(b.N) })
						b.ReportMetric(float64(time.Since(acked).Microseconds())/1000, "r2-drain-ms")
						after := cbScrape(b, r1)
						pubEv := after.events["published"] - before.events["published"]
						pubBy := after.bytes["published"] - before.bytes["published"]
						b.ReportMetric(pubBy/max(pubEv, 1), "wire-B/report")
						testwait.EventuallyWithin(b, 10*time.Second, "r2 counts its applied events", func() bool {
							return cbScrape(b, r2).events["applied"]-before2.events["applied"] >= pubEv
						})
						applied := cbScrape(b, r2).events["applied"] - before2.events["applied"]
						b.ReportMetric(after.events["dropped"]-before.events["dropped"]+pubEv-applied, "dropped")
					case mode.on:
						var after cbCounters
						testwait.EventuallyWithin(b, 10*time.Second, "r1 published every report", func() bool {
							after = cbScrape(b, r1)
							return after.events["published"]+after.events["dropped"]-before.events["published"]-before.events["dropped"] >= float64(b.N)
						})
						pubEv := after.events["published"] - before.events["published"]
						b.ReportMetric((after.bytes["published"]-before.bytes["published"])/max(pubEv, 1), "wire-B/report")
						b.ReportMetric(after.events["dropped"]-before.events["dropped"], "dropped")
					}
					stream.CloseSend()
				})
			}
		})
	}
}
