package sim

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prefixroute/prefixroute/internal/cluster"
	"github.com/prefixroute/prefixroute/internal/natstest"
	"github.com/prefixroute/prefixroute/internal/servertest"
	"github.com/prefixroute/prefixroute/server"
)

// startDaemon runs prefixrouted in-process on 127.0.0.1:0 until the test
// ends and returns its gRPC address.
func startDaemon(t *testing.T, reportInterval time.Duration) string {
	return startReplica(t, reportInterval, nil)
}

// startReplica is startDaemon joined to a cluster when c is not nil
// (servertest.Start on the real clock).
func startReplica(t *testing.T, reportInterval time.Duration, c *cluster.Config) string {
	t.Helper()
	return servertest.Start(t, servertest.RealClock(), servertest.Config(func(d *server.DaemonConfig) {
		d.HTTPListen, d.Server.ReportInterval, d.Server.Cluster = "off", reportInterval, c
	})).Addr()
}

// TestLiveSmoke runs 2 s of a tiny scenario against a real prefixrouted
// over gRPC: instances stream ReportLoad with cache events, gateway workers
// call Pick, and a weight change goes through SetWeights.
func TestLiveSmoke(t *testing.T) {
	sc := parse(t, tinyYAML)
	sc.Weights[1].At = Duration(time.Second) // 1:9 after one second
	addr := startDaemon(t, 50*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	start := time.Now()
	res, err := RunLive(ctx, sc, "softmax", LiveOptions{Addr: addr, Duration: 2 * time.Second, Workers: 4})
	if err != nil {
		t.Fatal(err)
	}
	l := res.Live
	t.Logf("%v wall: %d picks, %d errors, pick p50 %.2f ms p99 %.2f ms, %d reports acked, %d served",
		time.Since(start), l.Picks, l.PickErrors, l.PickP50Ms, l.PickP99Ms, l.Acks, len(res.Records))
	if l.PickErrors != 0 || len(res.Rejected) != 0 || l.Unfinished != 0 {
		t.Fatalf("%d pick errors (first: %s), %d rejected, %d unfinished", l.PickErrors, l.FirstError, len(res.Rejected), l.Unfinished)
	}
	if len(res.Records) < 50 || len(res.Records) != res.Generated || l.Picks != res.Generated {
		t.Fatalf("served %d, picked %d, generated %d", len(res.Records), l.Picks, res.Generated)
	}
	if l.Acks == 0 {
		t.Fatal("no report acknowledged")
	}
	s := res.Summarise()
	if s.DepShare[1] == 0 {
		t.Fatalf("deployment b got no traffic after the weight change: %v", s.DepShare)
	}
}

// TestLiveSmokeReplicas is TestLiveSmoke against three replicas joined
// through a real NATS server: workers and instances spread over them, the
// weight change made on the first reaches the others.
func TestLiveSmokeReplicas(t *testing.T) {
	sc := parse(t, tinyYAML)
	sc.Weights[1].At = Duration(time.Second)
	ns := natstest.Start(t)
	var addrs []string
	for i := range 3 {
		addrs = append(addrs, startReplica(t, 50*time.Millisecond,
			&cluster.Config{URLs: []string{ns.URL()}, Name: fmt.Sprintf("r%d", i+1)}))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := RunLive(ctx, sc, "softmax", LiveOptions{Addr: addrs[0], Replicas: addrs[1:], Duration: 2 * time.Second, Workers: 6})
	if err != nil {
		t.Fatal(err)
	}
	l := res.Live
	t.Logf("3 replicas: %d picks, %d errors, pick p50 %.2f ms p99 %.2f ms, %d reports acked", l.Picks, l.PickErrors,
		l.PickP50Ms, l.PickP99Ms, l.Acks)
	if l.PickErrors != 0 || len(res.Rejected) != 0 || l.Unfinished != 0 || len(res.Records) != res.Generated {
		t.Fatalf("%d pick errors (first: %s), %d rejected, %d unfinished, served %d of %d", l.PickErrors, l.FirstError,
			len(res.Rejected), l.Unfinished, len(res.Records), res.Generated)
	}
	if s := res.Summarise(); s.DepShare[1] == 0 {
		t.Fatalf("deployment b got no traffic after the weight change: %v", s.DepShare)
	}
}

func TestLiveRejects(t *testing.T) {
	sc := parse(t, tinyYAML)
	for _, tc := range []struct{ addr, variant string }{
		{"10.0.0.1:50051", "softmax"},
		{"example.com:50051", "softmax"},
		{"127.0.0.1:1", "rr"},
	} {
		if _, err := RunLive(context.Background(), sc, tc.variant, LiveOptions{Addr: tc.addr}); err == nil {
			t.Errorf("RunLive(%s, %s): no error", tc.addr, tc.variant)
		}
	}
	for _, ok := range []string{"127.0.0.1:1", "[::1]:1", "localhost:1", "127.3.4.5:1"} {
		if err := CheckLoopback(ok); err != nil {
			t.Errorf("CheckLoopback(%s): %v", ok, err)
		}
	}
}

// TestMain fails the package's tests if they leave goroutines running.
func TestMain(m *testing.M) { servertest.VerifyNoLeaks(m) }
