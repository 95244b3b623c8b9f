package server_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/daemon"
	"github.com/prefixroute/prefixroute/internal/natstest"
	"github.com/prefixroute/prefixroute/internal/servertest"
	"github.com/prefixroute/prefixroute/internal/testwait"
	"github.com/prefixroute/prefixroute/pkg/client"
)

// blockHash is block j of instance i: distinct, spread over 64 bits like
// real chained hashes (so they cost their real size on the wire).
func blockHash(i, j int) uint64 {
	z := uint64(i)<<32 | uint64(j) + 0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// joinFleet is replicas 1 and 2, each behind a byte-counting proxy to
// NATS, holding n instances (half reporting to each through pkg/client
// Reporters with cache events) with m cached blocks each; a third proxy
// waits for the replica that joins.
type joinFleet struct {
	n, m    int
	proxies []*natstest.Proxy
	logs    []*logRecorder
	r1, r2  *servertest.Sidecar
}

// startJoinFleet starts the fleet and waits until replicas 1 and 2 hold
// every instance's cache.
func startJoinFleet(tb testing.TB, n, m int) *joinFleet {
	ns := natstest.Start(tb)
	f := &joinFleet{n: n, m: m, logs: []*logRecorder{{}, {}, {}}}
	for range 3 {
		f.proxies = append(f.proxies, natstest.StartProxy(tb, ns.Addr()))
	}
	f.r1 = servertest.Start(tb, servertest.Replica(f.proxies[0].URL(), "r1"), servertest.Config(f.logTo(0)))
	f.r2 = servertest.Start(tb, servertest.Replica(f.proxies[1].URL(), "r2"), servertest.Config(f.logTo(1)))
	conns := make([]*grpc.ClientConn, 2)
	for k, r := range []*servertest.Sidecar{f.r1, f.r2} {
		cc, err := client.Dial(r.D.Addr())
		if err != nil {
			tb.Fatal(err)
		}
		conns[k] = cc
	}
	reporters := make([]*client.Reporter, n)
	quiet := quietLogger()
	for i := range n {
		rp, err := client.NewReporter(conns[i%2], client.ReporterOptions{
			Pool: "chat", Deployment: fmt.Sprintf("d%d", i%4), InstanceID: fmt.Sprintf("i-%03d", i),
			Address: fmt.Sprintf("10.0.%d.%d:8000", i/250, i%250), CacheEvents: true, Logger: quiet,
			Load: func() client.Load {
				return client.Load{PrefillTokensPerSecond: 10000, KVCapacityBlocks: uint64(2 * m)}
			},
		})
		if err != nil {
			tb.Fatal(err)
		}
		hashes := make([]uint64, m)
		for j := range hashes {
			hashes[j] = blockHash(i, j)
		}
		rp.Stored(hashes...)
		reporters[i] = rp
	}
	tb.Cleanup(func() { // before the daemons stop
		var wg sync.WaitGroup
		for _, rp := range reporters {
			wg.Go(func() {
				if err := rp.Close(); err != nil {
					tb.Errorf("Reporter.Close: %v", err)
				}
			})
		}
		wg.Wait()
		for _, cc := range conns {
			cc.Close()
		}
	})
	for _, r := range []*servertest.Sidecar{f.r1, f.r2} {
		f.await(tb, r, nil, "replicas 1 and 2 hold every instance's cache", f.r1, f.r2)
	}
	return f
}

// logTo records replica k's logs (k: 0 to 2).
func (f *joinFleet) logTo(k int) func(*daemon.Config) {
	return func(c *daemon.Config) { c.Server.Logger = slog.New(f.logs[k]) }
}

// join starts replica 3 and waits until it holds what replica 1 holds
// (converged); it returns replica 3 and replica 1's view.
func (f *joinFleet) join(tb testing.TB) (*servertest.Sidecar, map[string]*pb.InstanceStatus) {
	r3 := servertest.Start(tb, servertest.Replica(f.proxies[2].URL(), "r3"), servertest.Config(f.logTo(2)))
	want := instances(f.r1, "chat")
	f.await(tb, r3, want, "replica 3 converged", f.r1, f.r2, r3)
	return r3, want
}

// joinBound is how long await waits: a stuck run's bound, not a speed
// limit (under -race on a loaded 2-core host the 200 × 1000-block fill
// took over 30 s).
const joinBound = 2 * time.Minute

// await polls converged every 20 ms (listing the instances takes the
// pool's lock, and polling faster slows the catch-up) for joinBound, then
// fails after dumping what the replicas rs warned about.
func (f *joinFleet) await(tb testing.TB, e *servertest.Sidecar, want map[string]*pb.InstanceStatus, what string,
	rs ...*servertest.Sidecar) {
	tb.Helper()
	for start := time.Now(); !f.converged(e, want); time.Sleep(20 * time.Millisecond) {
		if time.Since(start) > joinBound {
			f.dump(tb, rs...)
			tb.Fatalf("not after %v: %s", joinBound, what)
		}
	}
}

// converged reports whether e lists the fleet's n instances, all OK, each
// with m cached blocks (want nil) or with want's cached blocks.
func (f *joinFleet) converged(e *servertest.Sidecar, want map[string]*pb.InstanceStatus) bool {
	got := instances(e, "chat")
	if len(got) != f.n {
		return false
	}
	for id, in := range got {
		if in.GetState() != pb.InstanceState_INSTANCE_STATE_OK {
			return false
		}
		if want == nil && in.GetCachedBlocks() != uint64(f.m) {
			return false
		}
		if want != nil && (want[id] == nil || in.GetCachedBlocks() != want[id].GetCachedBlocks()) {
			return false
		}
	}
	return true
}

// dump logs what the replicas warned about, and their cluster counters.
func (f *joinFleet) dump(tb testing.TB, rs ...*servertest.Sidecar) {
	for k, l := range f.logs {
		for _, rec := range l.all() {
			if _, ok := rec.attrs["error"]; ok {
				tb.Logf("replica %d: %s %v", k+1, rec.msg, rec.attrs)
			}
		}
	}
	for k, r := range rs {
		fams := scrape(tb, r)
		for _, dir := range []string{"published", "received", "dropped", "applied"} {
			v, _ := servertest.MetricValue(fams, "prefixroute_cluster_events_total", map[string]string{"direction": dir})
			tb.Logf("replica %d: events %s %v", k+1, dir, v)
		}
		tb.Logf("replica %d: %d instances", k+1, len(instances(r, "chat")))
	}
}

// TestReplicaLateJoinCatchUp: replica 3 joins a fleet of 200 instances ×
// 1000 cached blocks and catches up by snapshot (one peer sends its whole
// view). It converges exactly: the same instances, all OK, each with the
// same cached_blocks, deployment and address as on replica 1, and the
// blocks themselves match. BenchmarkReplicaLateJoin measures the time and
// the bytes.
func TestReplicaLateJoinCatchUp(t *testing.T) {
	const n, m = 200, 1000
	f := startJoinFleet(t, n, m)
	r3, want := f.join(t)
	// Replica 3 lists every instance once the last one is imported, a
	// moment before it logs the snapshot as applied: wait for the line.
	testwait.EventuallyWithin(t, joinBound, "replica 3 logs \"snapshot applied\"", func() bool {
		return len(f.logs[2].find("snapshot applied")) > 0
	})
	got := instances(r3, "chat")
	for id, w := range want {
		g := got[id]
		if g == nil || g.GetCachedBlocks() != w.GetCachedBlocks() || g.GetDeployment() != w.GetDeployment() ||
			g.GetAddress() != w.GetAddress() || g.GetCachedBlocks() != m {
			t.Errorf("%s on replica 3: %v; on replica 1: %v", id, g, w)
		}
	}
	c := context.Background()
	for _, i := range []int{0, 1, 57, 133, n - 1} {
		for _, j := range []int{0, m / 2, m - 1} {
			p, err := r3.Pick.Pick(c, &pb.PickRequest{Pool: "chat", PrefixHashes: []uint64{blockHash(i, j)}, PromptTokens: 1024,
				Audit: pb.AuditLevel_AUDIT_LEVEL_FULL})
			if err != nil {
				t.Fatal(err)
			}
			for _, in := range p.GetDecision().GetInstances() {
				want := uint32(0)
				if in.GetInstanceId() == fmt.Sprintf("i-%03d", i) {
					want = 1
				}
				if in.GetMatchedBlocks() != want {
					t.Errorf("block %d of i-%03d: replica 3 matches %d blocks on %s, want %d", j, i, in.GetMatchedBlocks(), in.GetInstanceId(), want)
				}
			}
		}
	}
}
