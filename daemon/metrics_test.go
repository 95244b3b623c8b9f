package daemon

import (
	"context"
	"math"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/internal/testwait"
)

// TestMetricsAfterScriptedTraffic drives a real daemon over gRPC (reports,
// weights, picks that succeed and fail) and checks the /metrics exposition:
// counts exact, gauges equal to the state, and the realised traffic share
// moving toward the configured weights.
func TestMetricsAfterScriptedTraffic(t *testing.T) {
	clock := testwait.NewClock()
	clock.Set(time.Unix(1_800_000_000, 0))
	d := obsStart(t, func(c *Config) { c.Server.Now = clock.Now })
	pick, load, admin := obsClients(t, d)
	ctx := context.Background()
	setWeights := func(pool string, w map[string]float64) {
		t.Helper()
		if _, err := admin.SetWeights(ctx, &pb.SetWeightsRequest{AllowNewPool: true, Pool: pool, Weights: w}); err != nil {
			t.Fatalf("SetWeights %s: %v", pool, err)
		}
	}

	setWeights("chat", map[string]float64{"a": 1, "b": 3})
	a1, b1, b2 := obsConnect(t, load), obsConnect(t, load), obsConnect(t, load)
	a1.report(&pb.ReportLoadRequest{Pool: "chat", Deployment: "a", InstanceId: "a-1", Address: "10.0.0.1:8000",
		ReportsCacheEvents: true, StoredBlockHashes: []uint64{11, 12}})
	b1.report(&pb.ReportLoadRequest{Pool: "chat", Deployment: "b", InstanceId: "b-1", Address: "10.0.0.2:8000"})
	b2.report(&pb.ReportLoadRequest{Pool: "chat", Deployment: "b", InstanceId: "b-2", Address: "10.0.0.3:8000", Draining: true})
	for range 2 {
		a1.report(&pb.ReportLoadRequest{})
		b1.report(&pb.ReportLoadRequest{})
	}

	// Phase 1: 1:3, no prefix. Phase 2: 1:1. Seeds make the draws fixed.
	ok := map[string]int{}
	seed := uint64(0)
	picks := func(n int, hashes []uint64) (matched map[string]int) {
		t.Helper()
		matched = map[string]int{}
		for range n {
			seed++
			resp, err := pick.Pick(ctx, &pb.PickRequest{Pool: "chat", PrefixHashes: hashes, PromptTokens: 64, Seed: &seed})
			if err != nil {
				t.Fatalf("Pick: %v", err)
			}
			ok[resp.GetDeployment()]++
			for _, in := range resp.GetDecision().GetInstances() {
				if in.GetInstanceId() == resp.GetInstanceId() {
					matched[resp.GetDeployment()] += int(in.GetMatchedBlocks())
				}
			}
		}
		return matched
	}
	picks(200, nil)
	first := obsScrape(t, d)
	share1 := obsValue(t, first, "prefixroute_deployment_traffic_share_ratio", map[string]string{"pool": "chat", "deployment": "a"})
	if want := float64(ok["a"]) / 200; share1 != want {
		t.Errorf("traffic share of a after phase 1 = %v, want %v", share1, want)
	}
	if math.Abs(share1-0.25) > 0.1 {
		t.Errorf("traffic share of a after 200 picks at 1:3 = %v, want about 0.25", share1)
	}
	setWeights("chat", map[string]float64{"a": 1, "b": 1})
	picks(200, nil)
	// Phase 3: a prefix partly cached on a-1 (11, 12 of 11..14).
	okBefore := map[string]int{"a": ok["a"], "b": ok["b"]}
	matched := picks(20, []uint64{11, 12, 13, 14})

	// Failures: empty pool name, unknown pool, a pool without instances, a
	// drained pool.
	fail := func(req *pb.PickRequest, code codes.Code) {
		t.Helper()
		if _, err := pick.Pick(ctx, req); status.Code(err) != code {
			t.Fatalf("Pick %v: %v, want %v", req, err, code)
		}
	}
	fail(&pb.PickRequest{}, codes.InvalidArgument)
	fail(&pb.PickRequest{}, codes.InvalidArgument)
	for range 3 {
		fail(&pb.PickRequest{Pool: "nope"}, codes.NotFound)
	}
	setWeights("empty", map[string]float64{"x": 1})
	fail(&pb.PickRequest{Pool: "empty"}, codes.Unavailable)
	setWeights("drain", map[string]float64{"x": 0})
	obsConnect(t, load).report(&pb.ReportLoadRequest{Pool: "drain", Deployment: "x", InstanceId: "x-1", Address: "10.0.1.1:8000"})
	fail(&pb.PickRequest{Pool: "drain"}, codes.FailedPrecondition)

	fams := obsScrape(t, d)
	chat, err := d.Server().Registry().Pool("chat")
	if err != nil {
		t.Fatal(err)
	}
	blocks, pairs := chat.IndexStats()
	chatPicks := 420.0
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"prefixroute_picks_total", labelSet("pool", "chat", "deployment", "a", "outcome", "ok"), float64(ok["a"])},
		{"prefixroute_picks_total", labelSet("pool", "chat", "deployment", "b", "outcome", "ok"), float64(ok["b"])},
		{"prefixroute_picks_total", labelSet("pool", "", "deployment", "", "outcome", "invalid"), 2},
		{"prefixroute_picks_total", labelSet("pool", "", "deployment", "", "outcome", "unknown_pool"), 3},
		{"prefixroute_picks_total", labelSet("pool", "empty", "deployment", "", "outcome", "unavailable"), 1},
		{"prefixroute_picks_total", labelSet("pool", "drain", "deployment", "", "outcome", "drained"), 1},
		{"prefixroute_pick_excluded_instances_total", labelSet("pool", "chat", "reason", "draining"), chatPicks},
		{"prefixroute_pick_prefix_blocks_total", labelSet("pool", "chat", "deployment", "a"), float64(4 * (ok["a"] - okBefore["a"]))},
		{"prefixroute_pick_matched_blocks_total", labelSet("pool", "chat", "deployment", "a"), float64(matched["a"])},
		{"prefixroute_reports_total", labelSet("pool", "chat", "deployment", "a"), 3},
		{"prefixroute_reports_total", labelSet("pool", "chat", "deployment", "b"), 4},
		{"prefixroute_report_streams", labelSet("pool", "chat", "deployment", "a"), 1},
		{"prefixroute_report_streams", labelSet("pool", "chat", "deployment", "b"), 2},
		{"prefixroute_instances", labelSet("pool", "chat", "deployment", "b", "state", "draining"), 1},
		{"prefixroute_instances", labelSet("pool", "chat", "deployment", "b", "state", "ok"), 1},
		{"prefixroute_instances", labelSet("pool", "chat", "deployment", "a", "state", "stale"), 0},
		{"prefixroute_instance_report_age_seconds", labelSet("pool", "chat", "instance", "a-1"), 0},
		{"prefixroute_pick_eligible_instances", labelSet("pool", "chat", "deployment", "b"), 1},
		{"prefixroute_weights_version", labelSet("pool", "chat"), 2},
		{"prefixroute_deployment_weight", labelSet("pool", "chat", "deployment", "a"), 1},
		{"prefixroute_deployment_weight_share_ratio", labelSet("pool", "chat", "deployment", "b"), 0.5},
		{"prefixroute_deployment_window_picks", labelSet("pool", "chat", "deployment", "a"), float64(ok["a"])},
		{"prefixroute_deployment_traffic_share_ratio", labelSet("pool", "chat", "deployment", "a"), float64(ok["a"]) / chatPicks},
		{"prefixroute_prefix_index_blocks", labelSet("pool", "chat"), float64(blocks)},
		{"prefixroute_prefix_index_entries", labelSet("pool", "chat"), float64(pairs)},
		{"prefixroute_prefix_index_bytes", labelSet("pool", "chat"), float64(80*blocks + 44*pairs)},
	} {
		if got := obsValue(t, fams, c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	if _, found := obsSeries(fams, "prefixroute_picks_total", labelSet("pool", "nope")); found {
		t.Errorf("an unknown pool's name became a label value")
	}
	if blocks < 4 || pairs < 2 {
		t.Errorf("prefix index holds %d blocks, %d entries; want the reported and the recorded ones", blocks, pairs)
	}

	share2 := obsValue(t, fams, "prefixroute_deployment_traffic_share_ratio", labelSet("pool", "chat", "deployment", "a"))
	if !(math.Abs(share2-0.5) < math.Abs(share1-0.5)) {
		t.Errorf("after the weights went 1:3 -> 1:1, a's traffic share went %v -> %v: not toward 0.5", share1, share2)
	}

	h, found := obsSeries(fams, "prefixroute_pick_duration_seconds", labelSet("pool", "chat"))
	if !found || h.GetHistogram() == nil {
		t.Fatalf("no pick latency histogram for chat:\n%s", obsDump(fams["prefixroute_pick_duration_seconds"]))
	}
	if got := h.GetHistogram().GetSampleCount(); got != uint64(chatPicks) {
		t.Errorf("pick latency count = %d, want %v", got, chatPicks)
	}
	if b := h.GetHistogram().GetBucket(); len(b) < 15 || b[0].GetUpperBound() != 5e-6 {
		t.Errorf("pick latency buckets start at %v (%d buckets), want 5µs and at least 15", b[0].GetUpperBound(), len(b))
	}
}

// TestMetricsSaturatedPicks: a pick shed for saturation is an audited
// outcome of its own: outcome="saturated" (not "error"), its instances'
// exclusion reasons counted and the deployment's eligible count set to 0;
// under least_loaded the picked instance leaves the count.
func TestMetricsSaturatedPicks(t *testing.T) {
	clock := testwait.NewClock()
	d := obsStart(t, func(c *Config) { c.Server.Now = clock.Now })
	pick, load, admin := obsClients(t, d)
	ctx := context.Background()
	for _, id := range []string{"x-1", "x-2", "x-3"} {
		obsConnect(t, load).report(&pb.ReportLoadRequest{Pool: "sat", Deployment: "x", InstanceId: id, Address: "10.0.2.1:8000",
			KvCacheUsage: 0.99})
	}
	for range 2 { // least_loaded, the default: picks one of the three
		if _, err := pick.Pick(ctx, &pb.PickRequest{Pool: "sat"}); err != nil {
			t.Fatalf("Pick (least_loaded): %v", err)
		}
	}
	if _, err := admin.SetPolicy(ctx, &pb.SetPolicyRequest{AllowNewPool: true, Pool: "sat", Policy: &pb.Policy{OnSaturation: pb.OnSaturation_ON_SATURATION_SHED}}); err != nil {
		t.Fatal(err)
	}
	for range 4 {
		if _, err := pick.Pick(ctx, &pb.PickRequest{Pool: "sat"}); status.Code(err) != codes.ResourceExhausted {
			t.Fatalf("Pick (shed): %v, want ResourceExhausted", err)
		}
	}
	fams := obsScrape(t, d)
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"prefixroute_picks_total", labelSet("pool", "sat", "deployment", "", "outcome", "saturated"), 4},
		{"prefixroute_picks_total", labelSet("pool", "sat", "deployment", "x", "outcome", "ok"), 2},
		{"prefixroute_pick_excluded_instances_total", labelSet("pool", "sat", "reason", "kv_full"), 2*2 + 4*3},
		{"prefixroute_pick_eligible_instances", labelSet("pool", "sat", "deployment", "x"), 0},
	} {
		if got := obsValue(t, fams, c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
}

// labelSet is the label set of name, value pairs.
func labelSet(kv ...string) map[string]string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}
