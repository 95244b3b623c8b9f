package simlive

import (
	"context"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/prefixroute/prefixroute/daemon"
	"github.com/prefixroute/prefixroute/internal/cluster"
	"github.com/prefixroute/prefixroute/internal/natstest"
	"github.com/prefixroute/prefixroute/internal/servertest"
	"github.com/prefixroute/prefixroute/internal/sim"
	"github.com/prefixroute/prefixroute/internal/simout"
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
	return servertest.Start(t, servertest.RealClock(), servertest.Config(func(d *daemon.Config) {
		d.HTTPListen, d.Server.ReportInterval, d.Server.Cluster = "off", reportInterval, c
	})).Addr()
}

// TestLiveSmoke runs 2 s of a tiny scenario against a real prefixrouted
// over gRPC: instances stream ReportLoad with cache events, gateway workers
// call Pick, and a weight change goes through SetWeights.
func TestLiveSmoke(t *testing.T) {
	sc := parse(t)
	sc.Weights[1].At = sim.Duration(time.Second) // 1:9 after one second
	addr := startDaemon(t, 50*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	start := time.Now()
	res, err := RunLive(ctx, sc, "softmax", Options{Addr: addr, Duration: 2 * time.Second, Workers: 4})
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
	s := simout.Summarise(res)
	if s.DepShare[1] == 0 {
		t.Fatalf("deployment b got no traffic after the weight change: %v", s.DepShare)
	}
}

// TestLiveSmokeReplicas is TestLiveSmoke against three replicas joined
// through a real NATS server: workers and instances spread over them, the
// weight change made on the first reaches the others.
func TestLiveSmokeReplicas(t *testing.T) {
	sc := parse(t)
	sc.Weights[1].At = sim.Duration(time.Second)
	ns := natstest.Start(t)
	var addrs []string
	for i := range 3 {
		addrs = append(addrs, startReplica(t, 50*time.Millisecond,
			&cluster.Config{URLs: []string{ns.URL()}, Name: fmt.Sprintf("r%d", i+1)}))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := RunLive(ctx, sc, "softmax", Options{Addr: addrs[0], Replicas: addrs[1:], Duration: 2 * time.Second, Workers: 6})
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
	if s := simout.Summarise(res); s.DepShare[1] == 0 {
		t.Fatalf("deployment b got no traffic after the weight change: %v", s.DepShare)
	}
}

// TestLiveBaseline runs 2 s of the tiny scenario with its llm-d-style
// variant live and no router: the baseline picks in this process, fed every
// instance's report at the report interval, and follows the weight change.
func TestLiveBaseline(t *testing.T) {
	sc := parse(t)
	sc.Weights[1].At = sim.Duration(time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := RunLive(ctx, sc, "llmd", Options{Duration: 2 * time.Second, Workers: 4})
	if err != nil {
		t.Fatal(err)
	}
	l := res.Live
	t.Logf("%d picks, pick p50 %.3f ms, %d reports, %d served", l.Picks, l.PickP50Ms, l.Reports, len(res.Records))
	if l.Addr != localAddr || l.PickErrors != 0 || len(res.Rejected) != 0 || l.Unfinished != 0 {
		t.Fatalf("addr %q, %d pick errors (first: %s), %d rejected, %d unfinished", l.Addr, l.PickErrors, l.FirstError,
			len(res.Rejected), l.Unfinished)
	}
	if len(res.Records) < 50 || len(res.Records) != res.Generated || l.Picks != res.Generated {
		t.Fatalf("served %d, picked %d, generated %d", len(res.Records), l.Picks, res.Generated)
	}
	// Reports go out once per 50 ms to each of the 4 instances for at
	// least 2 s: 160. Half of that, allowing for a loaded host, still
	// tells them from reports only when the loop wakes for an event.
	if min := uint64(4 * (2 * time.Second / (50 * time.Millisecond)) / 2); l.Reports < min {
		t.Errorf("%d reports handed to the baseline, want at least %d", l.Reports, min)
	}
	if s := simout.Summarise(res); s.DepShare[1] == 0 {
		t.Fatalf("deployment b got no traffic after the weight change: %v", s.DepShare)
	}
}

func TestLiveRejects(t *testing.T) {
	sc := parse(t)
	for _, tc := range []struct{ addr, variant string }{
		{"10.0.0.1:50051", "softmax"},
		{"example.com:50051", "softmax"},
		{"127.0.0.1:1", "noopt"},
		{"127.0.0.1:1", "nosuch"},
	} {
		if _, err := RunLive(context.Background(), sc, tc.variant, Options{Addr: tc.addr}); err == nil {
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

// tinyYAML is a small two-deployment scenario with every workload class
// (internal/sim's test scenario), a weight change at 10 s and two
// baselines.
const tinyYAML = `
name: tiny
seed: 11
duration: 30s
block_tokens: 16
report_interval: 50ms
cache_events: true
deployments:
  - {name: a, instances: 2, prefill_tokens_per_second: 20000, batch_overhead: 5ms, kv_blocks: 600, decode_per_token: 1ms, max_batch_tokens: 2048}
  - {name: b, instances: 2, prefill_tokens_per_second: 15000, batch_overhead: 5ms, kv_blocks: 600, decode_per_token: 1ms, max_batch_tokens: 2048}
weights:
  - {at: 0s, weights: {a: 1, b: 0}}
  - {at: 10s, weights: {a: 1, b: 9}}
  - {at: 20s, weights: {a: 0, b: 1}}
workload:
  rate: 60
  classes:
    - {name: shared, share: 0.4, groups: 30, zipf: 1.0, prefix_tokens: {dist: uniform, min: 100, max: 600}, suffix_tokens: {dist: uniform, min: 8, max: 100}, output_tokens: 20}
    - {name: chat, share: 0.5, kind: conversation, conversations: 25, prefix_tokens: 200, suffix_tokens: 50, user_tokens: {dist: uniform, min: 10, max: 60}, output_tokens: {dist: uniform, min: 10, max: 40}, turns: {dist: uniform, min: 2, max: 6}}
    - {name: tail, share: 0.1, groups: 1000, zipf: 0.5, prefix_tokens: {dist: lognormal, median: 300, sigma: 0.5, max: 2000}, suffix_tokens: 30}
variants:
  - {name: softmax}
  - {name: noopt, optimistic: false}
  - {name: rr, picker: round_robin}
  - {name: llmd, picker: llmd}
`

// parse parses tinyYAML, failing the test on error.
func parse(t testing.TB) *sim.Scenario {
	t.Helper()
	sc, err := sim.ParseScenario([]byte(tinyYAML))
	if err != nil {
		t.Fatalf("ParseScenario: %v", err)
	}
	return sc
}

// TestLiveReportsCurrent: a report carries an instance's queue as it is
// when sent, as a real engine's does. One instance prefills 800 ms per
// request while a request arrives every 500 ms, so each pick meets a
// prefill in progress; the router's queue for it (the decision's queue_ms)
// matches the queue the request really joined to within a few report
// intervals. Before, the loop published loads only at events, so a report
// said what the running prefill had left at the previous event: the
// router's queue ran 200-500 ms over the truth.
func TestLiveReportsCurrent(t *testing.T) {
	sc, err := sim.ParseScenario([]byte(`
name: current
seed: 1
duration: 6s
block_tokens: 16
report_interval: 50ms
deployments:
  - {name: a, instances: 1, prefill_tokens_per_second: 1000, batch_overhead: 0ms, kv_blocks: 4000, decode_per_token: 1ms, max_batch_tokens: 800}
workload:
  rate: 2
  arrivals: uniform
  classes:
    - {name: solo, share: 1, groups: 100000, prefix_tokens: 784, suffix_tokens: 16, output_tokens: 1}
variants:
  - {name: softmax}
`))
	if err != nil {
		t.Fatalf("ParseScenario: %v", err)
	}
	addr := startDaemon(t, 50*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := RunLive(ctx, sc, "softmax", Options{Addr: addr, Duration: 6 * time.Second, Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	var errs []float64
	for _, r := range res.Records {
		if r.AheadMs > 0 {
			errs = append(errs, math.Abs(float64(r.PredictedQueueMs-r.AheadMs)))
		}
	}
	slices.Sort(errs)
	t.Logf("%d requests joined a queue; |router's queue − queue joined| ms: %.0f", len(errs), errs)
	if len(errs) < 8 {
		t.Fatalf("%d of %d requests joined a queue; want >= 8", len(errs), len(res.Records))
	}
	// A report is at most a quarter interval old when sent, and the router
	// sees it up to an interval later: 50 ms of drain, plus scheduling.
	if med := errs[len(errs)/2]; med > 100 {
		t.Fatalf("median |router's queue − queue joined| %.0f ms; want <= 100 ms", med)
	}
}
