package server_test

import (
	"math"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/internal/servertest"
	"github.com/prefixroute/prefixroute/internal/state"
)

// outcome is one Outcome message.
func outcome(pool, reqID, inst string, st pb.OutcomeStatus) *pb.Outcome {
	return &pb.Outcome{Pool: pool, RequestId: reqID, InstanceId: inst, Status: st}
}

const (
	served        = pb.OutcomeStatus_OUTCOME_STATUS_SERVED
	connectFailed = pb.OutcomeStatus_OUTCOME_STATUS_CONNECT_FAILED
)

// pickedCounts picks n times with seeds 1..n at audit level lvl and counts
// the chosen instances.
func pickedCounts(t *testing.T, e *servertest.Sidecar, n int, lvl pb.AuditLevel) map[string]int {
	t.Helper()
	got := map[string]int{}
	for i := 1; i <= n; i++ {
		resp, err := e.Pick.Pick(ctx(t), &pb.PickRequest{Pool: "m", Seed: u64(uint64(i)), Audit: lvl})
		if err != nil {
			t.Fatal(err)
		}
		got[resp.GetInstanceId()]++
	}
	return got
}

// TestOutcomeConnectFailedExcludes: one connect_failed keeps the instance
// out of every pick (full audit and the chosen-only path), audited as
// unreachable, through a report within the back-off; the first report
// after the back-off, or a served outcome, brings it back.
func TestOutcomeConnectFailedExcludes(t *testing.T) {
	for _, end := range []string{"report after back-off", "served"} {
		t.Run(end, func(t *testing.T) {
			e := servertest.Start(t)
			a, b := report(e, rep("m", "d", "a")), report(e, rep("m", "d", "b"))
			if got := pickedCounts(t, e, 40, pb.AuditLevel_AUDIT_LEVEL_NONE); got["a"] == 0 || got["b"] == 0 {
				t.Fatalf("before: picks %v, want both", got)
			}
			resp, err := e.Pick.ReportOutcome(ctx(t), &pb.ReportOutcomeRequest{Outcomes: []*pb.Outcome{outcome("m", "", "a", connectFailed)}})
			if err != nil {
				t.Fatal(err)
			}
			if resp.GetAccepted() != 1 || resp.GetUnknownInstances() != 0 {
				t.Errorf("response %v, want accepted 1, unknown 0", resp)
			}
			for _, lvl := range []pb.AuditLevel{pb.AuditLevel_AUDIT_LEVEL_NONE, pb.AuditLevel_AUDIT_LEVEL_CHOSEN, pb.AuditLevel_AUDIT_LEVEL_FULL} {
				if got := pickedCounts(t, e, 40, lvl); got["a"] != 0 || got["b"] != 40 {
					t.Errorf("audit %v after connect_failed: picks %v, want b only", lvl, got)
				}
			}
			full, err := e.Pick.Pick(ctx(t), &pb.PickRequest{Pool: "m", Seed: u64(1)})
			if err != nil {
				t.Fatal(err)
			}
			if r := instanceByID(t, full.GetDecision(), "a").GetExcludedReason(); r != "unreachable" {
				t.Errorf("a excluded_reason %q, want unreachable", r)
			}
			// A report within the back-off keeps it out.
			e.Clock.Advance(state.UnreachableBackoff - time.Millisecond)
			a.send(rep("m", "d", "a"))
			b.send(rep("m", "d", "b"))
			if got := pickedCounts(t, e, 20, pb.AuditLevel_AUDIT_LEVEL_NONE); got["a"] != 0 {
				t.Errorf("after a report within the back-off: picks %v, want b only", got)
			}
			switch end {
			case "served":
				if _, err := e.Pick.ReportOutcome(ctx(t), &pb.ReportOutcomeRequest{Outcomes: []*pb.Outcome{outcome("m", "", "a", served)}}); err != nil {
					t.Fatal(err)
				}
			default:
				e.Clock.Advance(time.Millisecond)
				a.send(rep("m", "d", "a"))
			}
			if got := pickedCounts(t, e, 40, pb.AuditLevel_AUDIT_LEVEL_NONE); got["a"] == 0 {
				t.Errorf("after %s: picks %v, want a again", end, got)
			}
			fams := e.Metrics()
			for _, tc := range []struct {
				status string
				want   float64
			}{{"connect_failed", 1}, {"served", map[string]float64{"served": 1}[end]}} {
				v, _ := servertest.MetricValue(fams, "prefixroute_outcomes_total", map[string]string{"pool": "m", "status": tc.status})
				if v != tc.want {
					t.Errorf("prefixroute_outcomes_total{status=%q} = %v, want %v", tc.status, v, tc.want)
				}
			}
			if v, _ := servertest.MetricValue(fams, "prefixroute_pick_excluded_instances_total", map[string]string{"pool": "m", "reason": "unreachable"}); v < 1 {
				t.Errorf("prefixroute_pick_excluded_instances_total{reason=unreachable} = %v, want > 0", v)
			}
		})
	}
}

// TestOutcomeMatchedWithPick: an outcome is kept with the pick of its
// request_id, with the decision's prediction and the observed ttft; an
// outcome of an unknown request_id, instance or pool is counted, not an
// error.
func TestOutcomeMatchedWithPick(t *testing.T) {
	e := servertest.Start(t)
	report(e, rep("m", "d", "a"))
	resp, err := e.Pick.Pick(ctx(t), &pb.PickRequest{Pool: "m", RequestId: "req-1", PromptTokens: 1000, Audit: pb.AuditLevel_AUDIT_LEVEL_NONE})
	if err != nil {
		t.Fatal(err)
	}
	ttft := 123.5
	out, err := e.Pick.ReportOutcome(ctx(t), &pb.ReportOutcomeRequest{Outcomes: []*pb.Outcome{
		{Pool: "m", RequestId: "req-1", InstanceId: resp.GetInstanceId(), Status: served, TtftMs: &ttft},
		outcome("m", "req-gone", "a", served),
		outcome("m", "req-2", "nobody", connectFailed),
		outcome("nopool", "req-3", "a", served),
	}})
	if err != nil {
		t.Fatal(err)
	}
	if out.GetAccepted() != 4 || out.GetMatched() != 1 || out.GetUnknownInstances() != 2 {
		t.Errorf("response %v, want accepted 4, matched 1, unknown_instances 2", out)
	}
	po, ok := e.D.Server().PickOutcome("req-1")
	if !ok {
		t.Fatal("PickOutcome(req-1): not kept")
	}
	// 1000 new tokens at 10000 tokens/s with the default doubling
	// context (17,000 tokens): 1000·(1 + 500/17000)/10000 s of prefill.
	wantPrefill := 1000 * (1 + 500.0/17000) / 10000 * 1000
	if !po.Reported || po.Tried != "a" || po.Instance != "a" || po.Status != served || !po.HasTTFT || po.TTFTMs != 123.5 ||
		math.Abs(po.PrefillMs-wantPrefill) > 1e-9 || po.CostMs < po.PrefillMs || po.Deployment != "d" || po.Pool != "m" {
		t.Errorf("PickOutcome(req-1) = %+v", po)
	}
	if v, _ := servertest.MetricValue(e.Metrics(), "prefixroute_outcomes_total", map[string]string{"pool": "", "status": "served"}); v != 1 {
		t.Errorf("outcomes of unknown pools = %v, want 1 (pool \"\")", v)
	}
}

// TestOutcomeInvalid: every limit of ReportOutcome gives InvalidArgument
// naming the field, and a refused call applies nothing.
func TestOutcomeInvalid(t *testing.T) {
	e := servertest.Start(t)
	report(e, rep("m", "d", "a"))
	long := strings.Repeat("x", 129)
	ok := outcome("m", "", "a", connectFailed)
	many := make([]*pb.Outcome, 1025)
	for i := range many {
		many[i] = outcome("m", "", "a", served)
	}
	for _, tc := range []struct {
		name string
		outs []*pb.Outcome
		msg  string
	}{
		{"empty", nil, "outcomes is empty"},
		{"too many", many, "outcomes has 1025 entries; the limit is 1024"},
		{"no pool", []*pb.Outcome{ok, outcome("", "", "a", served)}, "outcomes[1].pool is empty"},
		{"long pool", []*pb.Outcome{outcome(long, "", "a", served)}, "outcomes[0].pool is 129 bytes; the limit is 128"},
		{"no instance", []*pb.Outcome{outcome("m", "", "", served)}, "outcomes[0].instance_id is empty"},
		{"long instance", []*pb.Outcome{outcome("m", "", long, served)}, "outcomes[0].instance_id is 129 bytes"},
		{"long request id", []*pb.Outcome{outcome("m", strings.Repeat("r", 257), "a", served)}, "outcomes[0].request_id is 257 bytes; the limit is 256"},
		{"unspecified", []*pb.Outcome{outcome("m", "", "a", 0)}, "outcomes[0].status is unspecified"},
		{"unknown status", []*pb.Outcome{outcome("m", "", "a", 99)}, "outcomes[0].status is 99, not an OutcomeStatus"},
		{"negative ttft", []*pb.Outcome{{Pool: "m", InstanceId: "a", Status: served, TtftMs: f64(-1)}}, "outcomes[0].ttft_ms is -1"},
		{"NaN ttft", []*pb.Outcome{{Pool: "m", InstanceId: "a", Status: served, TtftMs: f64(math.NaN())}}, "outcomes[0].ttft_ms is NaN"},
		{"huge ttft", []*pb.Outcome{{Pool: "m", InstanceId: "a", Status: served, TtftMs: f64(3_600_001)}}, "outcomes[0].ttft_ms is 3.600001e+06"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.Pick.ReportOutcome(ctx(t), &pb.ReportOutcomeRequest{Outcomes: tc.outs})
			wantCode(t, err, codes.InvalidArgument, tc.msg)
		})
	}
	// The refused calls excluded nothing: a stays pickable.
	if got := pickedCounts(t, e, 5, pb.AuditLevel_AUDIT_LEVEL_NONE); got["a"] != 5 {
		t.Errorf("picks %v after refused calls, want a", got)
	}
}
