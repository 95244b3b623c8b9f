//go:build unix

package server_test

// Helpers of the clustering benchmarks (cluster_bench*_test.go).

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/daemon"
	"github.com/prefixroute/prefixroute/internal/cluster"
	"github.com/prefixroute/prefixroute/internal/natstest"
	"github.com/prefixroute/prefixroute/internal/servertest"
	"github.com/prefixroute/prefixroute/internal/testwait"
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
func cbStart(b *testing.B, on bool, mutate func(*daemon.Config)) (r1, r2 *servertest.Sidecar) {
	return cbStartMode(b, cbMode{on: on}, mutate)
}

// cbStartMode is cbStart in mode m: solo starts r1 joined, without r2.
func cbStartMode(b *testing.B, m cbMode, mutate func(*daemon.Config)) (r1, r2 *servertest.Sidecar) {
	b.Helper()
	cfg := func(name string, ns *natstest.Server) func(*daemon.Config) {
		return func(c *daemon.Config) {
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
	fams := e.Metrics()
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
