package console_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/internal/calib"
	"github.com/prefixroute/prefixroute/internal/servertest"
	"github.com/prefixroute/prefixroute/pkg/client"
)

// reportAs starts a pkg/client Reporter of pool/dep/id with role and a
// constant queue of queueMs; it stops at the end of the test.
func reportAs(t *testing.T, sc *servertest.Sidecar, pool, dep, id string, role pb.PdRole, queueMs float64) {
	t.Helper()
	r, err := client.NewReporter(sc.Conn, client.ReporterOptions{Pool: pool, Deployment: dep, InstanceID: id, Address: id + ":8000",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), MinBackoff: 5 * time.Millisecond, MaxBackoff: 100 * time.Millisecond,
		Load: func() client.Load {
			return client.Load{QueueMs: queueMs, HasQueueMs: true, KVCacheUsage: 0.1, KVCapacityBlocks: 20000, PrefillTokensPerSecond: 10000, BlockSizeTokens: 16, Role: role}
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := r.Close(); err != nil {
			t.Errorf("Reporter.Close: %v", err)
		}
	})
}

// waitInstances waits until pool lists n instances.
func waitInstances(t *testing.T, sc *servertest.Sidecar, pool string, n int) {
	t.Helper()
	servertest.EventuallyOK(t, func() string {
		resp, err := sc.Admin.ListInstances(context.Background(), &pb.ListInstancesRequest{Pool: pool})
		if err != nil {
			return err.Error()
		}
		if got := len(resp.GetInstances()); got != n {
			return fmt.Sprintf("pool %s lists %d instances, want %d", pool, got, n)
		}
		return ""
	})
}

// calibrate teaches deployment "fit" of pool "learn" (one instance, queue
// 0 ms) its prefill model: calib.MinSamples picks, each answered by a
// served outcome whose TTFT is twice the prefill the pick predicted (the
// fit, which also learns the doubling context, puts the scale near 2).
func calibrate(t *testing.T, sc *servertest.Sidecar) {
	t.Helper()
	reportAs(t, sc, "learn", "fit", "fit-1", pb.PdRole_PD_ROLE_UNSPECIFIED, 0)
	waitInstances(t, sc, "learn", 1)
	ctx := context.Background()
	for i := range calib.MinSamples {
		id := fmt.Sprint("r", i)
		resp, err := sc.Pick.Pick(ctx, &pb.PickRequest{Pool: "learn", RequestId: id, PromptTokens: uint32(500 + 37*i), Audit: pb.AuditLevel_AUDIT_LEVEL_CHOSEN})
		if err != nil {
			t.Fatal(err)
		}
		in := resp.GetDecision().GetInstances()[0]
		if _, err := sc.Pick.ReportOutcome(ctx, &pb.ReportOutcomeRequest{Outcomes: []*pb.Outcome{{Pool: "learn", RequestId: id, InstanceId: in.GetInstanceId(),
			Status: pb.OutcomeStatus_OUTCOME_STATUS_SERVED, TtftMs: proto.Float64(2*in.GetPrefillMs() + in.GetQueueMs())}}}); err != nil {
			t.Fatal(err)
		}
	}
}

// waiters holds picks of pool "busy" in its waiting room: the pool's one
// instance queues 500 ms over a max_queue_ms of 50, so the pool is
// saturated and under on_saturation: queue each pick waits (up to a
// queue_ttl of 1 min). bands gives, per priority, the flows of the picks
// to send (one pick per flow entry). release cancels them all and waits.
func waiters(t *testing.T, sc *servertest.Sidecar, bands map[int32][]string) (release func()) {
	t.Helper()
	ctx := context.Background()
	if _, err := sc.Admin.SetPolicy(ctx, &pb.SetPolicyRequest{Pool: "busy", AllowNewPool: true, Policy: &pb.Policy{
		OnSaturation: pb.OnSaturation_ON_SATURATION_QUEUE, MaxQueueMs: proto.Float64(50), QueueTtl: durationpb.New(time.Minute),
		QueueMaxWaiting: proto.Uint32(40), QueueMaxPerBand: proto.Uint32(20)}}); err != nil {
		t.Fatal(err)
	}
	reportAs(t, sc, "busy", "d", "busy-1", pb.PdRole_PD_ROLE_UNSPECIFIED, 500)
	waitInstances(t, sc, "busy", 1)
	pctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for prio, flows := range bands {
		for _, f := range flows {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, _ = sc.Pick.Pick(pctx, &pb.PickRequest{Pool: "busy", PromptTokens: 100, Priority: prio, FlowId: f}) // Canceled at release
			}()
		}
	}
	released := false
	release = func() {
		if !released {
			released = true
			cancel()
			wg.Wait()
		}
	}
	t.Cleanup(release)
	return release
}

// checkRolesAndCapacity is TestConsoleInBrowser's part for issues 29-31,
// on the page b shows of the daemon sc: the Role column of the instances
// view, and the Capacity page with a fit and with a waiting room.
func checkRolesAndCapacity(t *testing.T, b *browser, sc *servertest.Sidecar) {
	t.Helper()
	// An aggregated pool has no Role column; a disaggregated one shows each
	// instance's role.
	if must[bool](b, `!!document.querySelector('button[data-sort="role"]')`) {
		t.Error("instances of chat (no prefill or decode instance) show a Role column")
	}
	reportAs(t, sc, "pd", "d", "p-1", pb.PdRole_PD_ROLE_PREFILL, 0)
	reportAs(t, sc, "pd", "d", "d-1", pb.PdRole_PD_ROLE_DECODE, 0)
	b.open("#/pool/pd/instances")
	b.waitJS(`[...document.querySelectorAll('tr[data-instance] td.role')].map(c => c.parentNode.dataset.instance + "=" + c.textContent).sort().join() === "d-1=decode,p-1=prefill"`)

	// Capacity: a deployment's fit learned from outcomes, in prefixctl
	// calibration's words and units; the waiting room of a saturated pool
	// with its bands and flows, then its rejections by reason.
	calibrate(t, sc)
	cal, err := sc.Admin.GetSloCalibration(context.Background(), &pb.GetSloCalibrationRequest{Pool: "learn"})
	if err != nil || len(cal.GetDeployments()) != 1 {
		t.Fatalf("GetSloCalibration of learn: %v, %v", cal, err)
	}
	d := cal.GetDeployments()[0]
	b.open("#/pool/learn/capacity")
	b.waitJS(`document.querySelector('#cal tr[data-deployment="fit"]')`)
	wantRow := fmt.Sprintf("fit | 1 | yes | 64 | 0 | %d | %.2f× | %.0f tokens | %.2f× (reported only) | %.1f %%",
		d.GetClipped(), d.GetPrefillScale(), d.GetDoublingContextTokens(), d.GetQueueScale(), 100*d.GetMeanAbsRelResidual())
	if row := must[string](b, `[...document.querySelectorAll('#cal tr[data-deployment="fit"] > *')].map(c => c.textContent).join(" | ")`); row != wantRow {
		t.Errorf("capacity page, the fit of deployment fit: %q, want %q", row, wantRow)
	}
	if got := must[string](b, `document.querySelector('#cal-mode').textContent`); got != "Calibration apply (from 64 samples); prior doubling context 17000 tokens." {
		t.Errorf("capacity page, calibration: %q", got)
	}
	b.screenshot("capacity-fit")
	release := waiters(t, sc, map[int32][]string{5: {"gold", "gold", "silver"}, 0: {"default"}})
	b.open("#/pool/busy/capacity")
	b.waitJS(`document.querySelector('#queue-summary').dataset.waiting === "4" && document.querySelector('#queue-bands tr.band[data-priority="5"]').dataset.waiting === "3" && ` +
		`document.querySelector('#queue-bands tr.flow[data-flow="gold"]').dataset.waiting === "2"`)
	if got := must[string](b, `document.querySelector('#queue-summary').textContent`); !regexp.MustCompile(
		`^4 picks waiting, oldest \d+ ms; limits 40 picks, 20 per band, 60 s wait\.$`).MatchString(got) {
		t.Errorf("capacity page, waiting room: %q", got)
	}
	if got := must[string](b, `[...document.querySelectorAll('#queue-bands tr')].map(r => [...r.children].map(c => c.textContent).join("|")).join("\n")`); !regexp.MustCompile(
		`^Priority\|Flow\|Picks waiting\|Oldest wait\nband 5\|2 flows\|3 \(15 % of band limit\)\|\d+ ms\n\|gold\|2\|\d+ ms\n\|silver\|1\|\d+ ms\n` +
			`band 0\|1 flow\|1 \(5 % of band limit\)\|\d+ ms\n\|default\|1\|\d+ ms$`).MatchString(got) {
		t.Errorf("capacity page, bands and flows:\n%s", got)
	}
	b.screenshot("capacity")
	release()
	b.waitJS(`document.querySelector('#queue-summary').dataset.waiting === "0" && document.querySelector('#queue-counters').textContent.endsWith("Rejected: 0 queue_full, 0 queue_timeout, 0 sheddable_rejected, 4 canceled.")`)
}
