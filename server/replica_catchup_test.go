package server_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/internal/natstest"
	"github.com/prefixroute/prefixroute/internal/replica"
	"github.com/prefixroute/prefixroute/internal/servertest"
	"github.com/prefixroute/prefixroute/pkg/client"
	"github.com/prefixroute/prefixroute/server"
)

// blockHash is block j of instance i: distinct, spread over 64 bits like
// real chained hashes (so they cost their real size on the wire).
func blockHash(i, j int) uint64 {
	z := uint64(i)<<32 | uint64(j) + 0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// TestReplicaLateJoinCatchUp: replicas 1 and 2 hold N instances (half
// reporting to each through pkg/client Reporters with cache events) with M
// cached blocks each. Replica 3 then joins, once catching up by snapshot
// (one peer sends its whole view) and once by resend (every instance
// resends its cache through resend_cache in its ack). Either way replica 3
// converges exactly: the same instances, all OK, each with the same
// cached_blocks as on replica 1, and the blocks themselves match. The time
// to converge and the bytes moved through NATS are logged for both.
func TestReplicaLateJoinCatchUp(t *testing.T) {
	const (
		n = 200  // instances
		m = 1000 // cached blocks per instance
	)
	type result struct {
		took                    time.Duration
		joinerBytes, fleetBytes int64
		background              int64
		snapshotBytes           int64
		resends                 uint64
		grpcEvents              uint64 // block events the instances sent meanwhile
		net                     int64  // fleetBytes less the background
	}
	results := map[string]result{}
	for _, mode := range []string{replica.CatchUpSnapshot, replica.CatchUpResend} {
		t.Run(mode, func(t *testing.T) {
			ns := natstest.Start(t)
			proxies := []*natstest.Proxy{natstest.StartProxy(t, ns.Addr()), natstest.StartProxy(t, ns.Addr()), natstest.StartProxy(t, ns.Addr())}
			catchUp := func(c *server.DaemonConfig) {
				c.Server.ClusterCatchUp = mode // a peer's export of ~2 MB fits the default SnapshotTimeout (30 s)
			}
			logs := []*logRecorder{{}, {}, {}}
			logTo := func(k int) func(*server.DaemonConfig) {
				return func(c *server.DaemonConfig) { catchUp(c); c.Server.Logger = slog.New(logs[k]) }
			}
			// dump logs what the replicas warned about, and their cluster
			// counters, when the test is stuck.
			dump := func(rs ...*servertest.Sidecar) {
				for k, l := range logs {
					for _, rec := range l.all() {
						if _, ok := rec.attrs["error"]; ok {
							t.Logf("replica %d: %s %v", k+1, rec.msg, rec.attrs)
						}
					}
				}
				for k, r := range rs {
					fams := scrape(t, r)
					for _, dir := range []string{"published", "received", "dropped", "applied"} {
						v, _ := server.MetricValue(fams, "prefixroute_cluster_events_total", map[string]string{"direction": dir})
						t.Logf("replica %d: events %s %v", k+1, dir, v)
					}
					ins := instances(r, "chat")
					short := 0
					for _, in := range ins {
						if in.GetCachedBlocks() != m || in.GetState() != pb.InstanceState_INSTANCE_STATE_OK {
							short++
						}
					}
					t.Logf("replica %d: %d instances, %d not OK with %d blocks", k+1, len(ins), short, m)
				}
			}
			r1 := servertest.Start(t, servertest.Replica(proxies[0].URL(), "r1"), servertest.Config(logTo(0)))
			r2 := servertest.Start(t, servertest.Replica(proxies[1].URL(), "r2"), servertest.Config(logTo(1)))
			conns := make([]*grpc.ClientConn, 2)
			for k, r := range []*servertest.Sidecar{r1, r2} {
				cc, err := client.Dial(r.D.Addr())
				if err != nil {
					t.Fatal(err)
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
						return client.Load{PrefillTokensPerSecond: 10000, KVCapacityBlocks: 2 * m}
					},
				})
				if err != nil {
					t.Fatal(err)
				}
				hashes := make([]uint64, m)
				for j := range hashes {
					hashes[j] = blockHash(i, j)
				}
				rp.Stored(hashes...)
				reporters[i] = rp
			}
			t.Cleanup(func() { // before the daemons stop
				var wg sync.WaitGroup
				for _, rp := range reporters {
					wg.Go(func() {
						if err := rp.Close(); err != nil {
							t.Errorf("Reporter.Close: %v", err)
						}
					})
				}
				wg.Wait()
				for _, cc := range conns {
					cc.Close()
				}
			})
			converged := func(e *servertest.Sidecar, want map[string]*pb.InstanceStatus) bool {
				got := instances(e, "chat")
				if len(got) != n {
					return false
				}
				for id, in := range got {
					if in.GetState() != pb.InstanceState_INSTANCE_STATE_OK {
						return false
					}
					if want == nil && in.GetCachedBlocks() != m {
						return false
					}
					if want != nil && (want[id] == nil || in.GetCachedBlocks() != want[id].GetCachedBlocks()) {
						return false
					}
				}
				return true
			}
			setup := time.Now()
			for _, r := range []*servertest.Sidecar{r1, r2} {
				for start := time.Now(); !converged(r, nil); time.Sleep(20 * time.Millisecond) {
					if time.Since(start) > 30*time.Second {
						dump(r1, r2)
						t.Fatalf("replicas 1 and 2 do not hold every instance's cache after 30 s")
					}
				}
			}
			t.Logf("%d instances × %d blocks on replicas 1 and 2 after %v", n, m, time.Since(setup))

			// Background: what the fleet moves through NATS in a second
			// without anyone joining (load reports every 100 ms).
			before := proxies[0].Bytes() + proxies[1].Bytes()
			time.Sleep(time.Second)
			background := proxies[0].Bytes() + proxies[1].Bytes() - before

			var resends0, events0 uint64
			for _, rp := range reporters {
				st := rp.Stats()
				resends0, events0 = resends0+st.Resends, events0+st.Events
			}
			fleet0 := proxies[0].Bytes() + proxies[1].Bytes()
			start := time.Now()
			r3 := servertest.Start(t, servertest.Replica(proxies[2].URL(), "r3"), servertest.Config(logTo(2)))
			want := instances(r1, "chat")
			// Polled every 20 ms: listing 200 instances takes the pool's
			// lock, and polling faster slows the catch-up it measures.
			var took time.Duration
			for !converged(r3, want) {
				if took = time.Since(start); took > 30*time.Second {
					dump(r1, r2, r3)
					t.Fatalf("replica 3 not converged after %v", took)
				}
				time.Sleep(20 * time.Millisecond)
			}
			took = time.Since(start)
			res := result{took: took, joinerBytes: proxies[2].Bytes(),
				fleetBytes: proxies[0].Bytes() + proxies[1].Bytes() + proxies[2].Bytes() - fleet0, background: background}
			for _, rp := range reporters {
				st := rp.Stats()
				res.resends, res.grpcEvents = res.resends+st.Resends, res.grpcEvents+st.Events
			}
			res.resends -= resends0
			res.grpcEvents -= events0
			for _, rec := range logs[2].find("snapshot applied") {
				res.snapshotBytes += rec.attrs["bytes"].Int64()
			}
			// Exactly the same view: instance set, deployments, cached
			// blocks (the counts), and the blocks themselves for a sample.
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
			res.net = res.fleetBytes - int64(float64(res.background)*res.took.Seconds())
			results[mode] = res
			t.Logf("%s: replica 3 converged %v after it started; NATS bytes: replica 3 %d, whole fleet %d during the catch-up "+
				"(%d net of the background of %d B/s); snapshot bytes %d; whole-cache resends %d (%d block events over gRPC)",
				mode, res.took, res.joinerBytes, res.fleetBytes, res.net, res.background, res.snapshotBytes, res.resends, res.grpcEvents)
			if mode == replica.CatchUpSnapshot && res.snapshotBytes == 0 {
				t.Errorf("snapshot mode: no snapshot applied on replica 3")
			}
			if mode == replica.CatchUpResend && res.resends < n {
				t.Errorf("resend mode: %d whole-cache resends, want one per instance (%d)", res.resends, n)
			}
		})
	}
	s, r := results[replica.CatchUpSnapshot], results[replica.CatchUpResend]
	t.Logf("catch-up of %d instances × %d blocks: snapshot %v, %d B net through NATS (replica 3: %d B); "+
		"resend %v, %d B net through NATS (replica 3: %d B), plus %d block events resent over gRPC",
		n, m, s.took, s.net, s.joinerBytes, r.took, r.net, r.joinerBytes, r.grpcEvents)
}

// TestReplicaJoinDuringCacheChurn: replica 3 joins while the instances'
// caches keep changing (every instance stores and evicts blocks all the
// time). Cache events that reach replica 3 while its catch-up is in
// flight must not be lost or undone by the older view it catches up from:
// once the churn stops, replica 3 holds exactly what replica 1 holds.
func TestReplicaJoinDuringCacheChurn(t *testing.T) {
	const (
		n = 40  // instances
		m = 300 // initial blocks per instance
	)
	for _, mode := range []string{replica.CatchUpSnapshot, replica.CatchUpResend} {
		t.Run(mode, func(t *testing.T) {
			ns := natstest.Start(t)
			catchUp := func(c *server.DaemonConfig) { c.Server.ClusterCatchUp = mode }
			r1 := servertest.Start(t, servertest.Replica(ns.URL(), "r1"), servertest.Config(catchUp))
			r2 := servertest.Start(t, servertest.Replica(ns.URL(), "r2"), servertest.Config(catchUp))
			conns := make([]*grpc.ClientConn, 2)
			for k, r := range []*servertest.Sidecar{r1, r2} {
				cc, err := client.Dial(r.D.Addr())
				if err != nil {
					t.Fatal(err)
				}
				conns[k] = cc
			}
			quiet := quietLogger()
			reporters := make([]*client.Reporter, n)
			for i := range n {
				rp, err := client.NewReporter(conns[i%2], client.ReporterOptions{
					Pool: "chat", Deployment: "d", InstanceID: fmt.Sprintf("i-%03d", i), Address: fmt.Sprintf("10.1.0.%d:8000", i),
					CacheEvents: true, Logger: quiet, Interval: 10 * time.Millisecond,
					Load: func() client.Load { return client.Load{PrefillTokensPerSecond: 10000, KVCapacityBlocks: 1 << 20} },
				})
				if err != nil {
					t.Fatal(err)
				}
				for j := range m {
					rp.Stored(blockHash(i, j))
				}
				reporters[i] = rp
			}
			stop := make(chan struct{})
			var churn sync.WaitGroup
			var churned atomic.Int64 // blocks stored by the churn so far
			t.Cleanup(func() {
				select {
				case <-stop:
				default:
					close(stop)
				}
				churn.Wait()
				var wg sync.WaitGroup
				for _, rp := range reporters {
					wg.Go(func() {
						if err := rp.Close(); err != nil {
							t.Errorf("Reporter.Close: %v", err)
						}
					})
				}
				wg.Wait()
				for _, cc := range conns {
					cc.Close()
				}
			})
			counts := func(e *servertest.Sidecar) map[string]uint64 {
				out := map[string]uint64{}
				for id, in := range instances(e, "chat") {
					if in.GetState() == pb.InstanceState_INSTANCE_STATE_OK {
						out[id] = in.GetCachedBlocks()
					}
				}
				return out
			}
			servertest.EventuallyWithin(t, 30*time.Second, "replicas 1 and 2 hold every instance", func() bool {
				a, b := counts(r1), counts(r2)
				return len(a) == n && len(b) == n && fmt.Sprint(a) == fmt.Sprint(b)
			})
			// Churn: each instance stores a new block and evicts an old one
			// every 2 ms, so changes are in flight whenever replica 3 joins.
			for i, rp := range reporters {
				churn.Go(func() {
					next, old := m, 0
					tk := time.NewTicker(2 * time.Millisecond)
					defer tk.Stop()
					for {
						select {
						case <-stop:
							return
						case <-tk.C:
						}
						rp.Stored(blockHash(i, next))
						churned.Add(1)
						next++
						if next%3 == 0 { // the cache grows, and shrinks at its tail
							rp.Removed(blockHash(i, old))
							old++
						}
					}
				})
			}
			servertest.Eventually(t, "the churn under way on every instance", func() bool { return churned.Load() >= 2*n })
			logs := &logRecorder{}
			joining := churned.Load()
			r3 := servertest.Start(t, servertest.Replica(ns.URL(), "r3"), servertest.Config(func(c *server.DaemonConfig) {
				catchUp(c)
				c.Server.Logger = slog.New(logs)
			}))
			// The overlap the test is named for: replica 3 catches up (it
			// lists every instance, which only the cluster can tell it)
			// while the churn goes on, and the churn goes on after that.
			// Stores happened between the join and the catch-up, and more
			// after it, so events were in flight throughout.
			servertest.Eventually(t, "replica 3 lists every instance (its catch-up)", func() bool { return len(counts(r3)) == n })
			caughtUp := churned.Load()
			if caughtUp == joining {
				t.Fatalf("no block stored between replica 3's join and its catch-up (%d stores before both): no overlap", joining)
			}
			servertest.Eventually(t, "the churn going on after replica 3's catch-up", func() bool { return churned.Load() >= caughtUp+2*n })
			close(stop)
			churn.Wait()
			// Quiet now: every replica must end with the same blocks.
			quiet0 := time.Now()
			for {
				a, b, c := counts(r1), counts(r2), counts(r3)
				if len(a) == n && fmt.Sprint(a) == fmt.Sprint(c) && fmt.Sprint(a) == fmt.Sprint(b) {
					break
				}
				if time.Since(quiet0) > 10*time.Second {
					diff := 0
					for id, k := range a {
						if c[id] != k || b[id] != k {
							if diff < 5 {
								t.Errorf("%s: %d cached blocks on replica 1, %d on replica 2, %d on replica 3", id, k, b[id], c[id])
							}
							diff++
						}
					}
					for _, rec := range logs.all() {
						switch rec.msg {
						case "report stream opened", "finished call", "started call":
						default:
							t.Logf("replica 3 logged at %v: %s %v", rec.at.Format("15:04:05.000"), rec.msg, rec.attrs)
						}
					}
					t.Fatalf("%s: %d of %d instances differ between the replicas 10 s after the churn stopped", mode, diff, n)
				}
				time.Sleep(10 * time.Millisecond)
			}
			t.Logf("%s: replica 3 equal to replica 1 %v after the churn stopped; snapshots asked again for missed reports: %d",
				mode, time.Since(quiet0), len(logs.find("the peer's snapshot predates reports this replica missed; asking for a snapshot again")))
		})
	}
}
