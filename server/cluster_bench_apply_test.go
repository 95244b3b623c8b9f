//go:build unix

package server_test

// Clustering benchmarks of one report's way between replicas: publishing,
// applying, propagation (the package doc is in cluster_bench_test.go).

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/daemon"
	"github.com/prefixroute/prefixroute/internal/cluster"
	"github.com/prefixroute/prefixroute/internal/natstest"
	"github.com/prefixroute/prefixroute/internal/servertest"
	"github.com/prefixroute/prefixroute/internal/testwait"
)

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
			r2 := servertest.Start(b, servertest.Config(func(c *daemon.Config) {
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
			r1, r2 := cbStart(b, true, func(c *daemon.Config) {
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
