package server_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/durationpb"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/daemon"
	"github.com/prefixroute/prefixroute/internal/auth"
	"github.com/prefixroute/prefixroute/internal/protoconv"
	"github.com/prefixroute/prefixroute/internal/servertest"
	"github.com/prefixroute/prefixroute/internal/testpki"
	"github.com/prefixroute/prefixroute/internal/testwait"
)

type pickResult struct {
	resp *pb.PickResponse
	err  error
}

// waiting is the number of picks waiting for pool in e's router.
func waiting(e *servertest.Sidecar, pool string) int {
	n := 0
	for _, pq := range e.D.Server().FlowQueues() {
		if pq.Pool == pool {
			for _, b := range pq.Bands {
				n += b.Waiting
			}
		}
	}
	return n
}

// TestPickQueue: under on_saturation queue a pick on a saturated pool
// waits in the router and leaves with the instance when a report frees
// capacity, audited with its wait, band and flow; a sheddable pick is
// refused at once; a pick over queue_max_waiting is refused; a canceled
// pick leaves the queue at once; a pick past queue_ttl leaves with
// QUEUE_TIMEOUT.
func TestPickQueue(t *testing.T) {
	e := servertest.Start(t)
	setPolicy := func(p *pb.Policy) {
		t.Helper()
		if _, err := e.Admin.SetPolicy(ctx(t), &pb.SetPolicyRequest{AllowNewPool: true, Pool: "m", Policy: p}); err != nil {
			t.Fatal(err)
		}
	}
	setPolicy(&pb.Policy{OnSaturation: pb.OnSaturation_ON_SATURATION_QUEUE})
	r := rep("m", "d", "a")
	r.KvCacheUsage = 0.99
	in := report(e, r)

	held := make(chan pickResult, 1)
	go func() {
		resp, err := e.Pick.Pick(ctx(t), &pb.PickRequest{Pool: "m", PromptTokens: 100, Priority: 5, FlowId: "tenant-a"})
		held <- pickResult{resp, err}
	}()
	testwait.Eventually(t, "the pick waits", func() bool { return waiting(e, "m") == 1 })
	if v, ok := servertest.MetricValue(e.Metrics(), "prefixroute_flow_waiting", map[string]string{"pool": "m", "band": "5"}); !ok || v != 1 {
		t.Errorf("prefixroute_flow_waiting{band=5} = %v (found %v), want 1", v, ok)
	}

	_, err := e.Pick.Pick(ctx(t), &pb.PickRequest{Pool: "m", Priority: -1})
	wantCode(t, err, codes.ResourceExhausted, "sheddable_rejected", "priority -1")
	if got := protoconv.ReasonOf(err); got != "SHEDDABLE_REJECTED" {
		t.Errorf("sheddable: reason %q", got)
	}

	// queue_max_waiting 1: the second waiter is refused at the edge.
	setPolicy(&pb.Policy{QueueMaxWaiting: u32p(1)})
	_, err = e.Pick.Pick(ctx(t), &pb.PickRequest{Pool: "m"})
	wantCode(t, err, codes.ResourceExhausted, "queue_full", "limit queue_max_waiting 1")
	if got := protoconv.ReasonOf(err); got != "QUEUE_FULL" {
		t.Errorf("full: reason %q", got)
	}
	setPolicy(&pb.Policy{QueueMaxWaiting: u32p(2)})

	// A canceled pick leaves the queue at once.
	cctx, cancel := context.WithCancel(ctx(t))
	gone := make(chan error, 1)
	go func() {
		_, err := e.Pick.Pick(cctx, &pb.PickRequest{Pool: "m"})
		gone <- err
	}()
	testwait.Eventually(t, "the second pick waits", func() bool { return waiting(e, "m") == 2 })
	cancel()
	wantCode(t, <-gone, codes.Canceled)
	testwait.Eventually(t, "the canceled pick leaves", func() bool { return waiting(e, "m") == 1 })
	// Its leave is counted a moment after it is out of the queue (the
	// client saw Canceled before either): wait for the count too.
	testwait.Eventually(t, "the canceled pick counted", func() bool {
		v, _ := servertest.MetricValue(e.Metrics(), "prefixroute_flow_leaves_total", map[string]string{"pool": "m", "result": "canceled"})
		return v >= 1
	})

	// queue_ttl: a pick leaves at it with QUEUE_TIMEOUT.
	setPolicy(&pb.Policy{QueueTtl: durationpb.New(20 * time.Millisecond)})
	_, err = e.Pick.Pick(ctx(t), &pb.PickRequest{Pool: "m", FlowId: "tenant-b"})
	wantCode(t, err, codes.ResourceExhausted, "queue_timeout", `flow "tenant-b"`)
	if got := protoconv.ReasonOf(err); got != "QUEUE_TIMEOUT" {
		t.Errorf("timeout: reason %q", got)
	}

	// A report with headroom frees the first pick.
	r2 := rep("m", "d", "a")
	r2.KvCacheUsage = 0.1
	in.send(r2)
	res := <-held
	if res.err != nil {
		t.Fatal(res.err)
	}
	d := res.resp.GetDecision()
	if res.resp.GetInstanceId() != "a" || d.GetQueueWaitMs() <= 0 || d.GetQueueBand() != 5 || d.GetFlowId() != "tenant-a" {
		t.Fatalf("freed pick: instance %q, waited %v ms, band %d, flow %q; want a, > 0, 5, tenant-a",
			res.resp.GetInstanceId(), d.GetQueueWaitMs(), d.GetQueueBand(), d.GetFlowId())
	}
	if waiting(e, "m") != 0 {
		t.Fatalf("%d picks still wait", waiting(e, "m"))
	}
	fams := e.Metrics()
	for result, want := range map[string]float64{"dispatched": 1, "sheddable_rejected": 1, "queue_full": 1, "canceled": 1, "queue_timeout": 1} {
		if v, ok := servertest.MetricValue(fams, "prefixroute_flow_leaves_total", map[string]string{"pool": "m", "result": result}); !ok || v != want {
			t.Errorf("prefixroute_flow_leaves_total{result=%s} = %v (found %v), want %v", result, v, ok, want)
		}
	}
	if h := fams["prefixroute_flow_wait_seconds"].GetMetric(); len(h) != 1 || h[0].GetHistogram().GetSampleCount() != 1 {
		t.Errorf("prefixroute_flow_wait_seconds: %v, want one series of one sample", h)
	}
	// Not saturated: a pick does not wait and its audit says so.
	resp, err := e.Pick.Pick(ctx(t), &pb.PickRequest{Pool: "m", Priority: -3})
	if err != nil || resp.GetDecision().GetQueueWaitMs() != 0 || resp.GetDecision().GetFlowId() != "" {
		t.Fatalf("unsaturated pick: %v, %v", resp.GetDecision(), err)
	}
}

func u32p(v uint32) *uint32 { return &v }

// TestPickQueueFlowBinding: with a tokens file, a gateway identity bound to
// a flow and a maximum priority cannot promote itself or pose as another
// tenant: its pick asking priority 9 and flow tenant-a waits at priority 1
// in flow tenant-z. An unbound gateway's pick keeps what it asks.
func TestPickQueueFlowBinding(t *testing.T) {
	file := filepath.Join(t.TempDir(), "tokens.yaml")
	tokens := fmt.Sprintf(`identities:
  - {name: bound, roles: [gateway, operator, instance], token_sha256: %s, flow: {flow_id: tenant-z, max_priority: 1}}
  - {name: free, roles: gateway, token_sha256: %s}
`, auth.HashToken(testpki.Token("bound")), auth.HashToken(testpki.Token("free")))
	if err := os.WriteFile(file, []byte(tokens), 0o600); err != nil {
		t.Fatal(err)
	}
	e := servertest.Start(t, servertest.Config(func(c *daemon.Config) { c.TokensFile = file }))
	as := func(name string) context.Context {
		return metadata.AppendToOutgoingContext(ctx(t), "authorization", "Bearer "+testpki.Token(name))
	}
	if _, err := e.Admin.SetPolicy(as("bound"), &pb.SetPolicyRequest{AllowNewPool: true, Pool: "m", Policy: &pb.Policy{
		OnSaturation: pb.OnSaturation_ON_SATURATION_QUEUE, QueueTtl: durationpb.New(10 * time.Millisecond)}}); err != nil {
		t.Fatal(err)
	}
	st, err := e.Load.ReportLoad(as("bound"))
	if err != nil {
		t.Fatal(err)
	}
	r := rep("m", "d", "a")
	r.KvCacheUsage, r.Seq = 0.99, 1
	if err := st.Send(r); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recv(); err != nil {
		t.Fatal(err)
	}
	_, err = e.Pick.Pick(as("bound"), &pb.PickRequest{Pool: "m", Priority: 9, FlowId: "tenant-a"})
	wantCode(t, err, codes.ResourceExhausted, "queue_timeout", `priority 1, flow "tenant-z"`)
	_, err = e.Pick.Pick(as("bound"), &pb.PickRequest{Pool: "m", Priority: -4, FlowId: "tenant-a"})
	wantCode(t, err, codes.ResourceExhausted, "sheddable_rejected", `priority -4, flow "tenant-z"`)
	_, err = e.Pick.Pick(as("free"), &pb.PickRequest{Pool: "m", Priority: 9, FlowId: "tenant-a"})
	wantCode(t, err, codes.ResourceExhausted, "queue_timeout", `priority 9, flow "tenant-a"`)
	_, err = e.Pick.Pick(as("free"), &pb.PickRequest{Pool: "m", FlowId: strings.Repeat("f", 129)})
	wantCode(t, err, codes.InvalidArgument, "flow_id is 129 bytes; at most 128")
}

// TestPickQueueOvershoot: the dispatch between two reports stops at the
// saturation limit, counting the work the router itself dispatched since
// the report. 40 picks of 100 tokens (10 ms of prefill each at 10,000
// tokens/s) wait on an instance over max_queue_ms 200; one report of an
// empty queue frees it: exactly 21 leave with it (the 21st sees 200 ms,
// not over the limit; after it the queue is 210 ms, one pick over), the
// other 19 keep waiting until canceled.
func TestPickQueueOvershoot(t *testing.T) {
	e := servertest.Start(t)
	if _, err := e.Admin.SetPolicy(ctx(t), &pb.SetPolicyRequest{AllowNewPool: true, Pool: "m", Policy: &pb.Policy{
		OnSaturation: pb.OnSaturation_ON_SATURATION_QUEUE, MaxQueueMs: f64(200), DoublingContextTokens: f64(0)}}); err != nil {
		t.Fatal(err)
	}
	r := rep("m", "d", "a")
	r.QueueMs = f64(500)
	in := report(e, r)
	const n = 40
	cctx, cancel := context.WithCancel(ctx(t))
	defer cancel()
	results := make(chan error, n)
	for range n {
		go func() {
			_, err := e.Pick.Pick(cctx, &pb.PickRequest{Pool: "m", PromptTokens: 100, Audit: pb.AuditLevel_AUDIT_LEVEL_NONE})
			results <- err
		}()
	}
	testwait.Eventually(t, "40 picks wait", func() bool { return waiting(e, "m") == n })
	r2 := rep("m", "d", "a")
	r2.QueueMs = f64(0)
	in.send(r2)
	ok := 0
	for ok < 21 {
		if err := <-results; err != nil {
			t.Fatalf("pick %d: %v", ok, err)
		}
		ok++
	}
	testwait.Eventually(t, "19 picks still wait", func() bool { return waiting(e, "m") == n-21 })
	cancel()
	for range n - 21 {
		wantCode(t, <-results, codes.Canceled)
	}
	testwait.Eventually(t, "no pick waits", func() bool { return waiting(e, "m") == 0 })
}

// TestPickUnknownInstances: an instance whose report is older than
// stale_after is unknown, neither full nor free: the audit counts it in
// unknown_instances, and with the only other instance full the pool is
// saturated (the pick waits, then times out), not down.
func TestPickUnknownInstances(t *testing.T) {
	e := servertest.Start(t)
	if _, err := e.Admin.SetPolicy(ctx(t), &pb.SetPolicyRequest{AllowNewPool: true, Pool: "m", Policy: &pb.Policy{
		OnSaturation: pb.OnSaturation_ON_SATURATION_QUEUE, QueueTtl: durationpb.New(10 * time.Millisecond)}}); err != nil {
		t.Fatal(err)
	}
	report(e, rep("m", "d", "old"))
	e.Clock.Advance(3 * time.Second) // past stale_after (2 s)
	r := rep("m", "d", "fresh")
	in := report(e, r)
	resp, err := e.Pick.Pick(ctx(t), &pb.PickRequest{Pool: "m"})
	if err != nil || resp.GetInstanceId() != "fresh" || resp.GetDecision().GetUnknownInstances() != 1 {
		t.Fatalf("pick: %v, %v; want fresh with unknown_instances 1", resp.GetDecision(), err)
	}
	r.KvCacheUsage = 0.99
	in.send(r)
	_, err = e.Pick.Pick(ctx(t), &pb.PickRequest{Pool: "m"})
	wantCode(t, err, codes.ResourceExhausted, "queue_timeout")
}
