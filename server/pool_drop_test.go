package server_test

import (
	"fmt"
	"testing"
	"time"

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
// their metric series, keeps the configured one, and SetWeights on a new
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
	for _, s := range streams {
		s.close()
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
	fams := e.Metrics()
	if _, ok := servertest.MetricValue(fams, "prefixroute_weights_version", map[string]string{"pool": "p0"}); ok {
		t.Error("prefixroute_weights_version series for p0 after it was dropped")
	}
	if v, ok := servertest.MetricValue(fams, "prefixroute_weights_version", map[string]string{"pool": "kept"}); !ok || v != 1 {
		t.Errorf("configured pool: weights version %v (%v), want 1", v, ok)
	}
	// A report into a dropped pool creates it again.
	report(e, rep("p0", "d", "i"))
	if n := pools(); n != 3 {
		t.Errorf("%d pools after a report into p0, want 3", n)
	}
}
