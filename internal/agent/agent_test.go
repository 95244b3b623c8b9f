package agent

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/internal/enginemetrics"
	"github.com/prefixroute/prefixroute/internal/kvevents"
	"github.com/prefixroute/prefixroute/internal/testwait"
	"github.com/prefixroute/prefixroute/pkg/client"
)

// TestEndToEnd runs the engine stand-in, a real prefixrouted and the agent
// for each wire form and socket direction: Pick matches a stored prompt's
// blocks on the instance; after BlockRemoved it does not; a dropped message
// is replayed (with a replay socket) or makes the cache unknown (without);
// after AllBlocksCleared nothing matches; a killed engine makes the
// instance stale.
func TestEndToEnd(t *testing.T) {
	needStandIn(t)
	for _, tc := range []struct {
		dialect, metrics string
		engine           enginemetrics.Engine
		agentBinds       bool
		replay           bool
	}{
		{"vllm-map", "../enginemetrics/testdata/vllm.metrics", enginemetrics.VLLM, false, true},
		{"vllm-array", "../enginemetrics/testdata/vllm.metrics", enginemetrics.VLLM, true, false},
		{"sglang", "../enginemetrics/testdata/sglang.metrics", enginemetrics.SGLang, false, false},
	} {
		t.Run(tc.dialect, func(t *testing.T) {
			endToEnd(t, tc.dialect, tc.metrics, tc.engine, tc.agentBinds, tc.replay)
		})
	}
}

func endToEnd(t *testing.T, dialect, metrics string, kind enginemetrics.Engine, agentBinds, replay bool) {
	routerAddr := startRouter(t)
	cc, err := client.Dial(routerAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	admin := pb.NewAdminServiceClient(cc)
	if _, err := admin.SetWeights(context.Background(), &pb.SetWeightsRequest{AllowNewPool: true, Pool: pool, Weights: map[string]float64{"A": 1}}); err != nil {
		t.Fatal(err)
	}
	args := []string{"--dialect", dialect, "--metrics", metrics}
	pubEP := "tcp://127.0.0.1:0"
	if agentBinds {
		pubEP = fmt.Sprintf("tcp://127.0.0.1:%d", freePort(t))
	}
	args = append(args, "--pub", pubEP)
	if replay {
		args = append(args, "--replay", "tcp://127.0.0.1:0")
	}
	cfg := Config{Engine: kind, Pool: pool, Deployment: "A", InstanceID: "gpu-0", Address: "10.0.0.1:8000",
		BlockSize: blockSize, ScrapeInterval: 20 * time.Millisecond, Logger: quiet,
		ReporterMinBackoff: 5 * time.Millisecond, ReporterMaxBackoff: 50 * time.Millisecond}
	if agentBinds {
		// The agent listens; the engine connects to it.
		cfg.KVEvents, cfg.KVEventsBind = pubEP, true
	}
	e := startEngine(t, args...)
	cfg.MetricsURL = fmt.Sprintf("http://127.0.0.1:%d/metrics", e.metricsPort)
	if !agentBinds {
		cfg.KVEvents = fmt.Sprintf("tcp://127.0.0.1:%d", e.pubPort)
	}
	if replay {
		cfg.KVEventsReplay = fmt.Sprintf("tcp://127.0.0.1:%d", e.replayP)
	}
	ag := startAgent(t, cc, cfg)
	picker, err := client.NewPicker(cc, client.PickerOptions{Pool: pool, BlockSize: blockSize, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	want := func(what string, toks []uint32, n uint32) {
		t.Helper()
		testwait.EventuallyOK(t, func() string {
			if got := matched(t, picker, "gpu-0", toks); got != n {
				return fmt.Sprintf("%s: %d blocks matched on gpu-0, want %d", what, got, n)
			}
			return ""
		})
	}
	// The instance reports its load from the fixture.
	testwait.EventuallyOK(t, func() string {
		in := instance(picker, admin, "gpu-0")
		if in.GetBlockSizeTokens() != blockSize || in.GetKvCapacityBlocks() == 0 || in.GetWaitingRequests() == 0 {
			return fmt.Sprintf("instance %v", in)
		}
		return ""
	})
	// Stored: a 4-block prompt, in two events (3 blocks, then 1 child).
	// The PUB/SUB connection may still be forming: resend until the agent
	// received a live message (a real engine's first message comes minutes
	// after start). With a replay socket the agent is precise before any
	// live message (an empty replay), so precision alone does not show the
	// subscription took hold.
	p := prompt(1000, 4)
	testwait.EventuallyOK(t, func() string {
		if ag.Exact() && testutil.ToFloat64(ag.m.messages) > 0 {
			return ""
		}
		e.send(map[string]any{"op": "clear"})
		return "agent not precise yet"
	})
	// The agent is precise (Exact) from the moment it starts swapping its
	// approximate stream for a precise one; the router lists the instance
	// disconnected until the new stream's first report, and a Pick then
	// finds no instance. The approximate stream never reports cache
	// events, so this is the precise stream, connected.
	testwait.EventuallyOK(t, func() string {
		if in := instance(picker, admin, "gpu-0"); !in.GetReportsCacheEvents() || in.GetState() != pb.InstanceState_INSTANCE_STATE_OK {
			return fmt.Sprintf("the router does not list gpu-0 connected with cache events: %v", in)
		}
		return ""
	})
	e.send(map[string]any{"op": "store", "hashes": []int{1, 2, 3}, "parent": nil, "tokens": p[:3*blockSize]})
	e.send(map[string]any{"op": "store", "hashes": []int{4}, "parent": 3, "tokens": p[3*blockSize:]})
	want("stored", tokens32(p), 4)
	// Removed in the middle of the chain: only the first two still match.
	e.send(map[string]any{"op": "remove", "hashes": []int{3}})
	want("after BlockRemoved", tokens32(p), 2)
	// A dropped message.
	q := prompt(5000, 2)
	e.send(map[string]any{"op": "drop", "event": map[string]any{"op": "store", "hashes": []int{10, 11}, "parent": nil, "tokens": q}})
	e.send(map[string]any{"op": "store", "hashes": []int{12}, "parent": 11, "tokens": prompt(7000, 1)})
	if replay {
		// Replayed: the dropped blocks are there.
		want("after a replayed gap", tokens32(q), 2)
		if !ag.Exact() {
			t.Fatal("agent not precise after a replay")
		}
	} else {
		testwait.EventuallyOK(t, func() string {
			if in := instance(picker, admin, "gpu-0"); ag.Exact() || in.GetReportsCacheEvents() {
				return fmt.Sprintf("after a gap without replay the agent is precise=%v, router sees reports_cache_events=%v",
					ag.Exact(), in.GetReportsCacheEvents())
			}
			return ""
		})
		want("unknown cache", tokens32(p), 0)
	}
	// Cleared: precise again, nothing matches.
	e.send(map[string]any{"op": "clear"})
	testwait.EventuallyOK(t, func() string {
		if !ag.Exact() || !instance(picker, admin, "gpu-0").GetReportsCacheEvents() {
			return "not precise after AllBlocksCleared"
		}
		return ""
	})
	want("after AllBlocksCleared", tokens32(p), 0)
	want("after AllBlocksCleared", tokens32(q), 0)
	// Killed engine: the agent holds its reports and the instance goes stale.
	e.kill()
	testwait.EventuallyOK(t, func() string {
		if s := instance(picker, admin, "gpu-0").GetState(); s != pb.InstanceState_INSTANCE_STATE_STALE {
			return fmt.Sprintf("instance state %v after the engine died", s)
		}
		return ""
	})
}

// startAgent runs an agent until the end of the test, which fails if Run
// returned an error.
func startAgent(t *testing.T, cc *grpc.ClientConn, cfg Config) *Agent {
	t.Helper()
	a, err := New(cc, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("agent: %v", err)
		}
	})
	return a
}

// TestBlockSizeMismatch: an engine whose cache_config_info names another
// block size than the pool's stops the agent with an error naming both.
func TestBlockSizeMismatch(t *testing.T) {
	page, err := os.ReadFile("../enginemetrics/testdata/vllm.metrics") // block_size="16"
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if _, err := w.Write(page); err != nil {
			t.Errorf("serving the metrics page: %v", err)
		}
	}))
	defer srv.Close()
	cc, err := client.Dial(startRouter(t))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	a, err := New(cc, Config{Engine: enginemetrics.VLLM, MetricsURL: srv.URL, Pool: pool, Deployment: "A",
		InstanceID: "gpu-0", Address: "10.0.0.1:8000", BlockSize: 32, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	err = a.Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "block size 16 tokens, the pool's block size is 32 tokens") {
		t.Fatalf("Run: %v", err)
	}
}

// TestHealthz: 503 with a JSON reason while the engine is unreachable.
func TestHealthz(t *testing.T) {
	cc, err := client.Dial(startRouter(t))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	a, err := New(cc, Config{Engine: enginemetrics.SGLang, MetricsURL: "http://127.0.0.1:1/metrics", Pool: pool,
		Deployment: "A", InstanceID: "gpu-0", Address: "10.0.0.1:8000", Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	a.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/healthz", nil))
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), `"error":"no successful scrape of http://127.0.0.1:1/metrics for 1s"`) {
		t.Fatalf("healthz: %d %s", rec.Code, rec.Body.String())
	}
	rec = httptest.NewRecorder()
	a.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "prefixagent_cache_precise 0") {
		t.Fatalf("metrics: %d %s", rec.Code, rec.Body.String())
	}
}

// TestMalformedBatch: a payload that does not decode is counted and
// skipped, and the cache becomes unknown (the router stops trusting the
// instance's exact index) rather than possibly wrong.
func TestMalformedBatch(t *testing.T) {
	cc, err := client.Dial(startRouter(t))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	a := benchAgent(t, cc, "")
	a.cfg.Pool = pool
	a.setMode(true)
	defer func() {
		if err := a.rep.Close(); err != nil {
			t.Errorf("Reporter.Close: %v", err)
		}
	}()
	st := &eventState{dec: kvevents.NewDecoder()}
	stored, _, _ := storedBatch(t, 1, 4, 0)
	ctx := context.Background()
	if err := a.message(ctx, st, kvevents.Message{Seq: 0, Payload: stored}); err != nil || !a.Exact() || a.al.Len() != 4 {
		t.Fatalf("seq 0: %v, precise %v, %d held", err, a.Exact(), a.al.Len())
	}
	if err := a.message(ctx, st, kvevents.Message{Seq: 1, Payload: []byte{0x92, 0xc1}}); err != nil {
		t.Fatal(err)
	}
	if a.Exact() || a.al.Len() != 0 || testutil.ToFloat64(a.m.malformed) != 1 {
		t.Fatalf("after a malformed batch: precise %v, %d held, malformed %v", a.Exact(), a.al.Len(), testutil.ToFloat64(a.m.malformed))
	}
	// Later stores are not reported until the engine clears its cache.
	more, _, _ := storedBatch(t, 100, 2, 500)
	if err := a.message(ctx, st, kvevents.Message{Seq: 2, Payload: more}); err != nil {
		t.Fatalf("seq 2: %v", err)
	}
	if a.Exact() || a.al.Len() != 0 {
		t.Fatalf("store while unknown: precise %v, %d held", a.Exact(), a.al.Len())
	}
}
