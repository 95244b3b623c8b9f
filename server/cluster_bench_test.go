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
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/internal/cluster"
	"github.com/prefixroute/prefixroute/internal/natstest"
	"github.com/prefixroute/prefixroute/internal/servertest"
	"github.com/prefixroute/prefixroute/internal/testwait"
	"github.com/prefixroute/prefixroute/server"
)

// cbMode is a benchmark's mode: clustering off, on (r1 and r2 joined), or
// solo (r1 joined, no other replica: its own cost without the co-located
// receiver's).
type cbMode struct {
	name     string
	on, solo bool
}

// cbModes are the modes of the Pick benchmark, cbIngestModes those of the
// ingest benchmark.
var (
	cbModes       = []cbMode{{name: "cluster=off"}, {name: "cluster=on", on: true}}
	cbIngestModes = []cbMode{{name: "cluster=off"}, {name: "cluster=solo", on: true, solo: true}, {name: "cluster=on", on: true}}
)

// cbClusterConfig is a replica's cluster configuration: the defaults
// (FlushInterval 2 ms, 256 KiB batches, 8 MiB outbox) but the name.
func cbClusterConfig(url, name string) *cluster.Config {
	return &cluster.Config{URLs: []string{url}, Name: name, ApplyTimeout: 2 * time.Second}
}

// cbStart starts the daemon measured, r1, with mutate applied; when on,
// r1 and a second replica r2 are joined through a new in-process NATS
// server, otherwise r2 is nil.
func cbStart(b *testing.B, on bool, mutate func(*server.DaemonConfig)) (r1, r2 *servertest.Sidecar) {
	return cbStartMode(b, cbMode{on: on}, mutate)
}

// cbStartMode is cbStart in mode m: solo starts r1 joined, without r2.
func cbStartMode(b *testing.B, m cbMode, mutate func(*server.DaemonConfig)) (r1, r2 *servertest.Sidecar) {
	b.Helper()
	cfg := func(name string, ns *natstest.Server) func(*server.DaemonConfig) {
		return func(c *server.DaemonConfig) {
			c.Server.RampTick = time.Hour
			if ns != nil {
				c.Server.Cluster = cbClusterConfig(ns.URL(), name)
			}
			if mutate != nil {
				mutate(c)
			}
		}
	}
	if !m.on {
		return servertest.Start(b, servertest.Config(cfg("", nil))), nil
	}
	ns := natstest.Start(b)
	r1 = servertest.Start(b, servertest.Config(cfg("r1", ns)))
	if !m.solo {
		r2 = servertest.Start(b, servertest.Config(cfg("r2", ns)))
	}
	return r1, r2
}

// cbLastSeq is the last_seq e's ListInstances shows for instance id of
// pool, 0 when it is not listed.
func cbLastSeq(e *servertest.Sidecar, pool, id string) uint64 {
	l, err := e.Admin.ListInstances(context.Background(), &pb.ListInstancesRequest{Pool: pool})
	if err != nil {
		return 0
	}
	for _, in := range l.GetInstances() {
		if in.GetInstanceId() == id {
			return in.GetLastSeq()
		}
	}
	return 0
}

// cbListed is the number of instances of pool e's ListInstances shows.
func cbListed(e *servertest.Sidecar, pool string) int {
	l, err := e.Admin.ListInstances(context.Background(), &pb.ListInstancesRequest{Pool: pool})
	if err != nil {
		return 0
	}
	return len(l.GetInstances())
}

// cbCounters reads a replica's cluster counters from /metrics:
// prefixroute_cluster_events_total and prefixroute_cluster_event_bytes*
// (cluster.Link.Stats exported at scrape time) by direction.
type cbCounters struct{ events, bytes map[string]float64 }

func cbScrape(b *testing.B, e *servertest.Sidecar) cbCounters {
	b.Helper()
	fams := server.ScrapeMetrics(b, e.D)
	out := cbCounters{events: map[string]float64{}, bytes: map[string]float64{}}
	for name, f := range fams {
		var into map[string]float64
		switch {
		case name == "prefixroute_cluster_events_total":
			into = out.events
		case strings.HasPrefix(name, "prefixroute_cluster_event_bytes"):
			into = out.bytes
		default:
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "direction" {
					into[l.GetValue()] += m.GetCounter().GetValue()
				}
			}
		}
	}
	if len(out.events) == 0 || len(out.bytes) == 0 {
		b.Fatalf("no cluster event counters in /metrics")
	}
	return out
}

// cbCPU is the CPU time (user + system) the process used so far.
func cbCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// cbPickEnv is benchEnv (bench_test.go) in either mode: n idle instances
// over deps deployments report to r1, each holding a shared 32-block
// system prefix through cache events; when on, it returns once r2 lists
// them all. refresh sends every instance a fresh report.
func cbPickEnv(b *testing.B, on bool, n, deps int) (r1, r2 *servertest.Sidecar, hashes []uint64, refresh func()) {
	r1, r2 = cbStart(b, on, nil)
	shared := make([]uint64, 32)
	for i := range shared {
		shared[i] = uint64(1_000_000 + i)
	}
	ins := make([]*instance, n)
	reports := make([]*pb.ReportLoadRequest, n)
	for i := range n {
		r := rep("m", fmt.Sprintf("d%02d", i%deps), fmt.Sprintf("i%04d", i))
		r.ReportsCacheEvents, r.StoredBlockHashes = true, shared
		ins[i] = report(r1, r)
		r.StoredBlockHashes = nil
		reports[i] = r
	}
	refresh = func() {
		for i, in := range ins {
			in.send(reports[i])
		}
	}
	if r2 != nil {
		testwait.EventuallyWithin(b, 30*time.Second, "r2 lists every instance", func() bool { return cbListed(r2, "m") == n })
	}
	hashes = make([]uint64, 256)
	copy(hashes, shared)
	for i := 32; i < len(hashes); i++ {
		hashes[i] = uint64(i)
	}
	return r1, r2, hashes, refresh
}

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
					r1, r2 := cbStartMode(b, mode, func(c *server.DaemonConfig) {
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

// BenchmarkClusterPublishPath is what the publishing replica does per
// report on the cluster path, outside a daemon: replica.publish's
// proto.Marshal of the ClusterEvent and cluster.Link.Publish (which
// frames it into the pool's batch), on a link with default batching to
// the in-process NATS server (no other subscriber). The link's sender
// goroutine hands the batches to the NATS client meanwhile; cpu-ns/op is
// the whole process (sender, NATS client and server included). Marshal
// and Publish are also timed apart (marshal-ns/op, publish-ns/op).
// payload-B is proto.Size of the event, wire-B/report the framed bytes
// per published event and events/batch from Link.Stats.
func BenchmarkClusterPublishPath(b *testing.B) {
	for _, events := range []int{0, 64} {
		b.Run(fmt.Sprintf("events=%d", events), func(b *testing.B) {
			ns := natstest.Start(b)
			l, err := cluster.Dial(context.Background(), *cbClusterConfig(ns.URL(), "bench-pub"), cluster.Handlers{})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(l.Close)
			m := rep("m", "d", "a")
			m.ReportsCacheEvents = true
			ev := &pb.ClusterEvent{Event: &pb.ClusterEvent_Report{Report: m}}
			var marshal, publish time.Duration
			var size int
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := cbCPU()
			for i := 0; b.Loop(); i++ {
				cbReport(uint64(i+1), events, m)
				t0 := time.Now()
				data, err := proto.Marshal(ev)
				if err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				if err := l.Publish("m", data); err != nil {
					b.Fatal(err)
				}
				marshal, publish = marshal+t1.Sub(t0), publish+time.Since(t1)
				size = len(data)
			}
			if err := l.Flush(context.Background()); err != nil {
				b.Fatal(err)
			}
			cpu := cbCPU() - cpu0
			b.StopTimer()
			st := l.Stats()
			n := float64(b.N)
			b.ReportMetric(float64(marshal.Nanoseconds())/n, "marshal-ns/op")
			b.ReportMetric(float64(publish.Nanoseconds())/n, "publish-ns/op")
			b.ReportMetric(float64(cpu.Nanoseconds())/n, "cpu-ns/op")
			b.ReportMetric(float64(size), "payload-B")
			b.ReportMetric(float64(st.PublishedBytes)/float64(max(st.PublishedEvents, 1)), "wire-B/report")
			b.ReportMetric(float64(st.PublishedEvents)/float64(max(st.PublishedBatches, 1)), "events/batch")
			b.ReportMetric(float64(st.DroppedEvents), "dropped")
		})
	}
}

// BenchmarkClusterApply is what the receiving replica does per report: a
// bare cluster.Link (a peer "bench-src") publishes b.N report events of
// instance a, marshalled beforehand, and the daemon r2 applies them
// (replica.onEvents: unmarshal, then applyReport into the instance's
// remote session). ns/op is the wall time from the first publish until r2
// shows the last report, per report: r2's event goroutine applies one
// batch at a time, so this is its throughput bound. cpu-ns/op is the
// whole process (publisher and NATS server included).
func BenchmarkClusterApply(b *testing.B) {
	for _, events := range []int{0, 64} {
		b.Run(fmt.Sprintf("events=%d", events), func(b *testing.B) {
			ns := natstest.Start(b)
			r2 := servertest.Start(b, servertest.Config(func(c *server.DaemonConfig) {
				c.Server.RampTick = time.Hour
				c.Server.Cluster = cbClusterConfig(ns.URL(), "r2")
			}))
			src, err := cluster.Dial(context.Background(), *cbClusterConfig(ns.URL(), "bench-src"), cluster.Handlers{})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(src.Close)
			m := rep("m", "d", "a")
			m.ReportsCacheEvents = true
			ev := &pb.ClusterEvent{Event: &pb.ClusterEvent_Report{Report: m}}
			payloads := make([][]byte, b.N)
			for i := range payloads {
				cbReport(uint64(i+1), events, m)
				if payloads[i], err = proto.Marshal(ev); err != nil {
					b.Fatal(err)
				}
			}
			before := cbScrape(b, r2)
			b.ReportAllocs()
			b.ResetTimer()
			start, cpu0 := time.Now(), cbCPU()
			for i, p := range payloads {
				if err := src.Publish("m", p); err != nil {
					b.Fatal(err)
				}
				// Back-pressure for the measurement only: at most 4 MiB
				// queued, so the outbox drops nothing.
				if i%256 == 255 {
					for src.Stats().PendingBytes > 4<<20 {
						time.Sleep(20 * time.Microsecond)
					}
				}
			}
			if err := src.Flush(context.Background()); err != nil {
				b.Fatal(err)
			}
			for cbLastSeq(r2, "m", "a") < uint64(b.N) {
				if time.Since(start) > 60*time.Second {
					b.Fatalf("r2 shows seq %d of %d after 60 s", cbLastSeq(r2, "m", "a"), b.N)
				}
				time.Sleep(100 * time.Microsecond)
			}
			cpu := cbCPU() - cpu0
			b.StopTimer()
			after := cbScrape(b, r2)
			st := src.Stats()
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
			b.ReportMetric(float64(b.N)-(after.events["applied"]-before.events["applied"]), "dropped")
			b.ReportMetric(float64(st.PublishedEvents)/float64(max(st.PublishedBatches, 1)), "events/batch")
		})
	}
}

// BenchmarkClusterPropagation measures, one report at a time, the time
// from a report acked by r1 until r2's ListInstances shows its seq
// (polled back to back over gRPC, so one ListInstances round trip, about
// 0.1-0.3 ms here, is the resolution). Each report is alone in its batch,
// so the batch's FlushInterval (2 ms) is part of every sample. Reports
// the median, p99 and mean; run it with -benchtime 200x for 200 reports.
func BenchmarkClusterPropagation(b *testing.B) {
	for _, events := range []int{0, 64} {
		b.Run(fmt.Sprintf("cluster=on/events=%d", events), func(b *testing.B) {
			// No per-stream rate limit: reports follow each other as soon
			// as the previous one is visible on r2.
			r1, r2 := cbStart(b, true, func(c *server.DaemonConfig) {
				c.Transport.ReportsPerSecond, c.Transport.ReportBurst = 1e9, 1e9
			})
			m := rep("m", "d", "a")
			m.ReportsCacheEvents = true
			in := report(r1, m)
			testwait.EventuallyWithin(b, 10*time.Second, "r2 shows instance a", func() bool { return cbLastSeq(r2, "m", "a") >= 1 })
			var lat []time.Duration
			b.ResetTimer()
			for b.Loop() {
				cbReport(in.seq+1, events, m) // send sets the same seq
				in.send(m)
				acked := time.Now()
				for cbLastSeq(r2, "m", "a") < in.seq {
					if time.Since(acked) > 10*time.Second {
						b.Fatalf("report %d not on r2 after 10 s", in.seq)
					}
				}
				lat = append(lat, time.Since(acked))
			}
			b.StopTimer()
			slices.Sort(lat)
			var sum time.Duration
			for _, d := range lat {
				sum += d
			}
			q := func(p float64) float64 {
				return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))].Microseconds()) / 1000
			}
			b.ReportMetric(q(0.5), "p50-ms")
			b.ReportMetric(q(0.99), "p99-ms")
			b.ReportMetric(float64(sum.Microseconds())/1000/float64(len(lat)), "mean-ms")
			b.ReportMetric(float64(len(lat)), "samples")
		})
	}
}
