package server_test

import (
	"math"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/daemon"
	"github.com/prefixroute/prefixroute/internal/protoconv"
	"github.com/prefixroute/prefixroute/internal/servertest"
	"github.com/prefixroute/prefixroute/server"
)

// TestPickErrors: each bad Pick gets its precise code and a message naming
// what was wrong.
func TestPickErrors(t *testing.T) {
	e := servertest.Start(t)
	report(e, rep("m", "d", "a"))
	tooMany := make([]uint64, 8193)
	for _, tc := range []struct {
		name  string
		req   *pb.PickRequest
		code  codes.Code
		parts []string
	}{
		{"empty pool", &pb.PickRequest{}, codes.InvalidArgument, []string{"pool is empty"}},
		{"unknown pool", &pb.PickRequest{Pool: "nope"}, codes.NotFound, []string{`"nope"`}},
		{"too many hashes", &pb.PickRequest{Pool: "m", PrefixHashes: tooMany}, codes.InvalidArgument,
			[]string{"prefix_hashes has 8193 hashes", "limit is 8192"}},
		{"NaN override", &pb.PickRequest{Pool: "m", LoadSnapshot: &pb.LoadSnapshot{Instances: []*pb.InstanceLoad{{InstanceId: "a", QueueMs: f64(math.NaN())}}}},
			codes.InvalidArgument, []string{"queue_ms is NaN"}},
		{"kv usage over 1", &pb.PickRequest{Pool: "m", LoadSnapshot: &pb.LoadSnapshot{Instances: []*pb.InstanceLoad{{InstanceId: "a", KvCacheUsage: f64(1.5)}}}},
			codes.InvalidArgument, []string{"kv_cache_usage is 1.5"}},
		{"everything excluded", &pb.PickRequest{Pool: "m", ExcludeInstances: []string{"a"}}, codes.Unavailable,
			[]string{"no eligible instance", "1 excluded_by_request"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.Pick.Pick(ctx(t), tc.req)
			wantCode(t, err, tc.code, tc.parts...)
		})
	}
	// The maximum itself is fine.
	if _, err := e.Pick.Pick(ctx(t), &pb.PickRequest{Pool: "m", PrefixHashes: tooMany[:8192], PromptTokens: 8192 * 16}); err != nil {
		t.Errorf("8192 hashes: %v", err)
	}
	// A configured pool with no instance yet is Unavailable, not NotFound.
	if _, err := e.Admin.SetWeights(ctx(t), &pb.SetWeightsRequest{AllowNewPool: true, Pool: "new", Weights: map[string]float64{"b": 0}}); err != nil {
		t.Fatal(err)
	}
	_, err := e.Pick.Pick(ctx(t), &pb.PickRequest{Pool: "new"})
	wantCode(t, err, codes.Unavailable, `pool "new" is warming up`)
	if r := protoconv.ReasonOf(err); r != protoconv.ReasonPoolWarming {
		t.Errorf("reason %q; want %s", r, protoconv.ReasonPoolWarming)
	}
}

// TestAdminErrors: bad weights and policies are InvalidArgument naming the
// field; a stale expected_version is Aborted; unknown pools are NotFound; a
// rejected call changes nothing.
func TestAdminErrors(t *testing.T) {
	e := servertest.Start(t)
	set := func(w map[string]float64, expect uint64) error {
		_, err := e.Admin.SetWeights(ctx(t), &pb.SetWeightsRequest{AllowNewPool: true, Pool: "m", Weights: w, ExpectedVersion: expect})
		return err
	}
	if err := set(map[string]float64{"a": 1}, 0); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		w      map[string]float64
		expect uint64
		code   codes.Code
		parts  []string
	}{
		{"NaN", map[string]float64{"a": math.NaN()}, 0, codes.InvalidArgument, []string{`"a"`, "NaN"}},
		{"negative", map[string]float64{"a": -1}, 0, codes.InvalidArgument, []string{`"a"`, "-1"}},
		{"over 1e6", map[string]float64{"a": 1e6 + 1}, 0, codes.InvalidArgument, []string{`"a"`, "1000000"}},
		{"empty", map[string]float64{}, 0, codes.InvalidArgument, []string{"no deployments"}},
		{"stale version", map[string]float64{"a": 2}, 5, codes.Aborted, []string{"expected_version 5", "current 1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantCode(t, set(tc.w, tc.expect), tc.code, tc.parts...)
		})
	}
	got, err := e.Admin.GetWeights(ctx(t), &pb.GetWeightsRequest{Pool: "m"})
	if err != nil {
		t.Fatal(err)
	}
	if got.GetVersion() != 1 || got.GetWeights()["a"] != 1 {
		t.Errorf("after rejected calls: version %d weights %v", got.GetVersion(), got.GetWeights())
	}
	if err := set(map[string]float64{"a": 3}, 1); err != nil {
		t.Errorf("CAS at the current version: %v", err)
	}
	wantCode(t, set(map[string]float64{"a": 4}, 1), codes.Aborted, "expected_version 1")

	_, err = e.Admin.SetPolicy(ctx(t), &pb.SetPolicyRequest{AllowNewPool: true, Pool: "m", Policy: &pb.Policy{DeltaMs: f64(-1)}})
	wantCode(t, err, codes.InvalidArgument, "delta_ms")
	_, err = e.Admin.SetPolicy(ctx(t), &pb.SetPolicyRequest{AllowNewPool: true, Pool: "m", Policy: &pb.Policy{Strategy: pb.Strategy(42)}})
	wantCode(t, err, codes.InvalidArgument, "strategy")
	_, err = e.Admin.SetPolicy(ctx(t), &pb.SetPolicyRequest{AllowNewPool: true, Pool: "m", Policy: &pb.Policy{LambdaH: f64(101)}})
	wantCode(t, err, codes.InvalidArgument, "lambda_h")
	// Every problem in one message naming the pool, without package prefixes.
	_, err = e.Admin.SetPolicy(ctx(t), &pb.SetPolicyRequest{AllowNewPool: true, Pool: "m", Policy: &pb.Policy{Strategy: pb.Strategy(42),
		DeltaMs: f64(1e-300), BatchWaitMs: f64(1e300), DefaultKvCapacityBlocks: proto.Uint64(0),
		StaleAfter: &durationpb.Duration{Seconds: 360000}}})
	wantMsg := `pool "m": invalid policy: strategy must be softmax, threshold or argmin, got 42; ` +
		"delta_ms must be in [0.001, 1000000] ms, got 1e-300; batch_wait_ms must be in [0, 60000] ms, got 1e+300; " +
		"stale_after must be in [10ms, 1h0m0s], got 100h0m0s; forget_after must be >= stale_after, got 30s (stale_after 100h0m0s); " +
		"default_kv_capacity_blocks must be in [1, 1073741824] blocks, got 0"
	if st, _ := status.FromError(err); st.Code() != codes.InvalidArgument || st.Message() != wantMsg {
		t.Errorf("SetPolicy with absurd values: %v\nwant InvalidArgument: %s", err, wantMsg)
	}
	pol, err := e.Admin.SetPolicy(ctx(t), &pb.SetPolicyRequest{AllowNewPool: true, Pool: "m", Policy: &pb.Policy{Strategy: pb.Strategy_STRATEGY_THRESHOLD, DeltaMs: f64(10)}})
	if err != nil {
		t.Fatal(err)
	}
	if pol.GetPolicy().GetDeltaMs() != 10 || pol.GetPolicy().GetLambdaH() != 10 || pol.GetPolicy().GetStrategy() != pb.Strategy_STRATEGY_THRESHOLD {
		t.Errorf("merged policy: %v", pol.GetPolicy())
	}

	for name, call := range map[string]func() error{
		"GetWeights":    func() error { _, err := e.Admin.GetWeights(ctx(t), &pb.GetWeightsRequest{Pool: "x"}); return err },
		"GetPolicy":     func() error { _, err := e.Admin.GetPolicy(ctx(t), &pb.GetPolicyRequest{Pool: "x"}); return err },
		"ListInstances": func() error { _, err := e.Admin.ListInstances(ctx(t), &pb.ListInstancesRequest{Pool: "x"}); return err },
	} {
		t.Run(name, func(t *testing.T) { wantCode(t, call(), codes.NotFound, `"x"`) })
	}
	_, err = e.Admin.GetWeights(ctx(t), &pb.GetWeightsRequest{})
	wantCode(t, err, codes.InvalidArgument, "pool is empty")
}

// TestReportErrors: malformed reports end the stream with InvalidArgument
// naming the field; renaming the instance on a stream is refused; a second
// stream for the same instance replaces the first with Aborted.
func TestReportErrors(t *testing.T) {
	e := servertest.Start(t)
	open := func(m *pb.ReportLoadRequest) error {
		stream, err := e.Load.ReportLoad(ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		if err := stream.Send(m); err != nil {
			t.Fatal(err)
		}
		_, err = stream.Recv()
		return err
	}
	bad := rep("m", "d", "a")
	bad.KvCacheUsage = 1.01
	wantCode(t, open(bad), codes.InvalidArgument, "kv_cache_usage is 1.01")
	noAddr := rep("m", "d", "a")
	noAddr.Address = ""
	wantCode(t, open(noAddr), codes.InvalidArgument, "address is empty")
	longID := rep("m", "d", strings.Repeat("x", 129))
	wantCode(t, open(longID), codes.InvalidArgument, "instance_id is 129 bytes", "limit is 128")
	nan := rep("m", "d", "a")
	nan.PrefillTokensPerSecond = math.NaN()
	wantCode(t, open(nan), codes.InvalidArgument, "prefill_tokens_per_second is NaN")
	events := rep("m", "d", "a")
	events.StoredBlockHashes = make([]uint64, 65537)
	wantCode(t, open(events), codes.InvalidArgument, "65537 block events", "limit is 65536")

	in := report(e, rep("m", "d", "a"))
	renamed := rep("m", "other", "a")
	wantCode(t, in.trySend(renamed), codes.InvalidArgument, "deployment changed on the stream")

	first := report(e, rep("m", "d", "b"))
	report(e, rep("m", "d", "b"))
	wantCode(t, first.trySend(rep("m", "d", "b")), codes.Aborted, "newer ReportLoad stream replaced this one")
	list, err := e.Admin.ListInstances(ctx(t), &pb.ListInstancesRequest{Pool: "m"})
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range list.GetInstances() {
		if st.GetInstanceId() == "b" && st.GetState() != pb.InstanceState_INSTANCE_STATE_OK {
			t.Errorf("b after its stream was replaced: %v", st.GetState())
		}
	}
}

// TestAdminBadPoolName: an admin call with a bad pool name says so without
// talking of picks.
func TestAdminBadPoolName(t *testing.T) {
	e := servertest.Start(t)
	_, err := e.Admin.SetWeights(ctx(t), &pb.SetWeightsRequest{AllowNewPool: true, Pool: "a\x01b", Weights: map[string]float64{"d": 1}})
	wantCode(t, err, codes.InvalidArgument, "invalid name", "control character U+0001")
	if strings.Contains(err.Error(), "pick") {
		t.Errorf("admin error talks of picks: %v", err)
	}
}

// TestReportIntervalOverRateLimitRefused: the daemon does not ask instances
// for more reports than it lets a stream send.
func TestReportIntervalOverRateLimitRefused(t *testing.T) {
	_, err := daemon.Start(daemon.Config{Listen: "127.0.0.1:0", HTTPListen: "off",
		Transport: daemon.TransportLimits{ReportsPerSecond: 50},
		Server:    server.Options{DataDir: t.TempDir(), ReportInterval: 10 * time.Millisecond}})
	if err == nil || !strings.Contains(err.Error(), "100 reports/s, over the limit of 50 reports/s") {
		t.Fatalf("Start: %v", err)
	}
}
