package server_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"google.golang.org/grpc/codes"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/daemon"
	"github.com/prefixroute/prefixroute/internal/servertest"
	"github.com/prefixroute/prefixroute/internal/testwait"
)

// TestReportCreatedPoolsAreDropped fills the pool cap with pools created
// by reports (and one configured by an operator), ends their streams and
// moves the clock past forget_after twice (once to forget the instances,
// once for the empty pools): the sweep drops the report-created pools with
// their metric series (takeovers, flaps and exclusions too), keeps the configured one, and SetWeights on a new
// pool, refused while the cap was full, succeeds.
func TestReportCreatedPoolsAreDropped(t *testing.T) {
	const maxPools = 6
	e := servertest.Start(t, servertest.Config(func(c *daemon.Config) {
		c.Server.Limits.MaxPools = maxPools
		c.Server.SweepInterval = 5 * time.Millisecond
	}))
	if _, err := e.Admin.SetWeights(ctx(t), &pb.SetWeightsRequest{AllowNewPool: true, Pool: "kept", Weights: map[string]float64{"d": 1}}); err != nil {
		t.Fatal(err)
	}
	var streams []*instance
	for i := range maxPools - 1 {
		pool := fmt.Sprintf("p%d", i)
		streams = append(streams, report(e, rep(pool, "d", "i")))
		if _, err := e.Pick.Pick(ctx(t), &pb.PickRequest{Pool: pool}); err != nil {
			t.Fatal(err)
		}
	}
	_, err := e.Admin.SetWeights(ctx(t), &pb.SetWeightsRequest{AllowNewPool: true, Pool: "new", Weights: map[string]float64{"d": 1}})
	wantCode(t, err, codes.ResourceExhausted, "too many pools")
	if _, ok := servertest.MetricValue(e.Metrics(), "prefixroute_weights_version", map[string]string{"pool": "p0"}); !ok {
		t.Fatal("no prefixroute_weights_version series for p0 before the sweep")
	}
	// p0 also counts a takeover, an identity flap and, once its instance
	// is gone, a pick's exclusions, and its pick retries (0): series
	// that must go with the pool.
	streams = append(streams, report(e, rep("p0", "d", "i")))
	for _, s := range streams {
		s.close()
	}
	testwait.Eventually(t, "p0's instance disconnected", func() bool {
		_, err := e.Pick.Pick(ctx(t), &pb.PickRequest{Pool: "p0"})
		return err != nil
	})
	for _, name := range []string{"prefixroute_instance_takeovers_total", "prefixroute_instance_identity_flaps_total", "prefixroute_pick_excluded_instances_total",
		"prefixroute_pick_retries_total"} {
		if _, ok := servertest.MetricValue(e.Metrics(), name, map[string]string{"pool": "p0"}); !ok {
			t.Fatalf("no %s series for p0 before the sweep", name)
		}
	}
	pools := func() int {
		resp, err := e.Admin.ListPools(ctx(t), &pb.ListPoolsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		return len(resp.GetPools())
	}
	instances := func() int {
		list, err := e.Admin.ListInstances(ctx(t), &pb.ListInstancesRequest{Pool: "p0"})
		if err != nil {
			return -1
		}
		return len(list.GetInstances())
	}
	// Within forget_after nothing goes; past it the instances go, and the
	// pools, now empty, wait one more forget_after.
	e.Clock.Advance(29 * time.Second)
	testwait.Never(t, "a pool dropped within forget_after", 50*time.Millisecond, func() bool { return pools() != maxPools })
	e.Clock.Advance(2 * time.Second)
	testwait.Eventually(t, "instances forgotten", func() bool { return instances() == 0 })
	testwait.Never(t, "a pool dropped as soon as its instances went", 50*time.Millisecond, func() bool { return pools() != maxPools })
	e.Clock.Advance(31 * time.Second)
	testwait.Eventually(t, "report-created pools dropped", func() bool { return pools() == 1 })

	if _, err := e.Admin.SetWeights(ctx(t), &pb.SetWeightsRequest{AllowNewPool: true, Pool: "new", Weights: map[string]float64{"d": 1}}); err != nil {
		t.Fatalf("SetWeights on a new pool after the sweep: %v", err)
	}
	// Every series of p0 goes with it but the pick latency histogram's,
	// which OpenTelemetry cannot delete (SECURITY.md: bounded by the SDK's
	// 2,000 series per instrument). The sweep drops the pool from the
	// registry (what ListPools shows) a moment before its series: wait.
	var fams map[string]*dto.MetricFamily
	testwait.EventuallyOK(t, func() string {
		fams = e.Metrics()
		var left []string
		for name, fam := range fams {
			if name == "prefixroute_pick_duration_seconds" {
				continue
			}
			for _, m := range fam.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "pool" && l.GetValue() == "p0" {
						left = append(left, fmt.Sprintf("%s%v", name, m.GetLabel()))
					}
				}
			}
		}
		if len(left) > 0 {
			slices.Sort(left)
			return fmt.Sprintf("series for p0 after it was dropped: %s", strings.Join(left, "; "))
		}
		return ""
	})
	if v, ok := servertest.MetricValue(fams, "prefixroute_weights_version", map[string]string{"pool": "kept"}); !ok || v != 1 {
		t.Errorf("configured pool: weights version %v (%v), want 1", v, ok)
	}
	// A report into a dropped pool creates it again.
	report(e, rep("p0", "d", "i"))
	if n := pools(); n != 3 {
		t.Errorf("%d pools after a report into p0, want 3", n)
	}
}
