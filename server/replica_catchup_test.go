package server_test

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
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
	ns := natstest.Start(t)
	r1 := servertest.Start(t, servertest.Replica(ns.URL(), "r1"))
	r2 := servertest.Start(t, servertest.Replica(ns.URL(), "r2"))
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
	r3 := servertest.Start(t, servertest.Replica(ns.URL(), "r3"), servertest.Config(func(c *daemon.Config) {
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
	// Quiet now: every replica must end with the same blocks. On failure,
	// replica 3's log says how its catch-up went.
	defer func() {
		if !t.Failed() {
			return
		}
		for _, rec := range logs.all() {
			switch rec.msg {
			case "report stream opened", "finished call", "started call":
			default:
				t.Logf("replica 3 logged at %v: %s %v", rec.at.Format("15:04:05.000"), rec.msg, rec.attrs)
			}
		}
	}()
	took := testwait.EventuallyOK(t, func() string {
		a, b, c := counts(r1), counts(r2), counts(r3)
		if len(a) == n && fmt.Sprint(a) == fmt.Sprint(c) && fmt.Sprint(a) == fmt.Sprint(b) {
			return ""
		}
		var diffs []string
		for id, k := range a {
			if c[id] != k || b[id] != k {
				diffs = append(diffs, fmt.Sprintf("%s: %d cached blocks on replica 1, %d on replica 2, %d on replica 3", id, k, b[id], c[id]))
			}
		}
		slices.Sort(diffs)
		return fmt.Sprintf("%d of %d instances differ between the replicas after the churn stopped (replica 1 lists %d): %s",
			len(diffs), n, len(a), strings.Join(diffs[:min(5, len(diffs))], "; "))
	})
	t.Logf("replica 3 equal to replica 1 %v after the churn stopped; snapshots asked again for missed reports: %d",
		took, len(logs.find("the peer's snapshot predates reports this replica missed; asking for a snapshot again")))
}
