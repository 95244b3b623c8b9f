package server_test

import (
	"fmt"
	"math"
	"testing"

	"google.golang.org/grpc/codes"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/internal/calib"
	"github.com/prefixroute/prefixroute/internal/servertest"
	"github.com/prefixroute/prefixroute/scheduler"
)

// TestOutcomesCalibrate: served outcomes whose TTFT is twice the predicted
// prefill (plus the queue the router saw) teach the deployment's fit; after
// calib.MinSamples of them the pool's picks price with it (the audit's
// calibration_version, prefill_scale and the prefill_ms they give), the
// observed/predicted histogram and the target attainment count every
// outcome, and outcomes of a fallback instance are not samples.
func TestOutcomesCalibrate(t *testing.T) {
	e := servertest.Start(t)
	defer e.Stop()
	a := report(e, rep("m", "d", "a"))
	met, missed := 0, 0
	pick := func(i int, audit pb.AuditLevel) *pb.PickResponse {
		t.Helper()
		resp, err := e.Pick.Pick(ctx(t), &pb.PickRequest{Pool: "m", RequestId: fmt.Sprint("r", i), PromptTokens: uint32(500 + 37*i),
			TtftSloMs: 400, Audit: audit})
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	for i := range calib.MinSamples {
		// A report before each pick: the queue the router sees is 0 to 80 ms.
		r := rep("m", "d", "a")
		r.QueueMs = f64(float64(i%5) * 20)
		a.send(r)
		in := pick(i, pb.AuditLevel_AUDIT_LEVEL_CHOSEN).GetDecision().GetInstances()[0]
		ttft := 2*in.GetPrefillMs() + in.GetQueueMs()
		if ttft <= 400 {
			met++
		} else {
			missed++
		}
		if _, err := e.Pick.ReportOutcome(ctx(t), &pb.ReportOutcomeRequest{Outcomes: []*pb.Outcome{
			{Pool: "m", RequestId: fmt.Sprint("r", i), InstanceId: "a", Status: served, TtftMs: f64(ttft)}}}); err != nil {
			t.Fatal(err)
		}
	}
	// A fallback's outcome: matched, counted, not a sample.
	pick(1000, pb.AuditLevel_AUDIT_LEVEL_NONE)
	if _, err := e.Pick.ReportOutcome(ctx(t), &pb.ReportOutcomeRequest{Outcomes: []*pb.Outcome{
		{Pool: "m", RequestId: "r1000", InstanceId: "other", Status: served, TtftMs: f64(5000)}}}); err != nil {
		t.Fatal(err)
	}
	st := e.D.Server().Calibration("m")
	if len(st) != 1 || st[0].Deployment != "d" || st[0].Version != 1 || st[0].Accepted != calib.MinSamples || st[0].Ignored != 1 {
		t.Fatalf("calibration %+v, want deployment d at version 1 with %d samples and 1 ignored", st, calib.MinSamples)
	}
	if s := st[0].PrefillScale; math.Abs(s-2) > 0.1 {
		t.Errorf("prefill scale %v, want about 2 (fit %+v)", s, st[0])
	}
	resp := pick(2000, pb.AuditLevel_AUDIT_LEVEL_FULL)
	dec := resp.GetDecision()
	dd := deploymentByName(t, dec, "d")
	if dec.GetCalibrationVersion() != 1 || dd.GetCalibrationVersion() != 1 || dd.GetPrefillScale() != st[0].PrefillScale ||
		dd.GetDoublingContextTokens() != st[0].DoublingContextTokens {
		t.Fatalf("audit: decision version %d, deployment %+v; want the fit %+v", dec.GetCalibrationVersion(), dd, st[0])
	}
	in := instanceByID(t, dec, "a")
	want := st[0].PrefillScale * scheduler.PrefillMs(in.GetUncachedTokens(), dec.GetPromptTokens()-in.GetUncachedTokens(),
		st[0].DoublingContextTokens, in.GetPrefillTokensPerSecond())
	if math.Abs(in.GetPrefillMs()-want) > 1e-9*want {
		t.Errorf("prefill_ms %v, want %v from the audit's figures", in.GetPrefillMs(), want)
	}
	cr, err := e.Admin.GetSloCalibration(ctx(t), &pb.GetSloCalibrationRequest{Pool: "m"})
	if err != nil || len(cr.GetDeployments()) != 1 || !cr.GetDeployments()[0].GetInUse() || cr.GetDeployments()[0].GetVersion() != 1 ||
		cr.GetDeployments()[0].GetPrefillScale() != st[0].PrefillScale || cr.GetMinSamples() != calib.MinSamples {
		t.Fatalf("GetSloCalibration: %v, %v", cr, err)
	}
	_, err = e.Admin.GetSloCalibration(ctx(t), &pb.GetSloCalibrationRequest{Pool: "nope"})
	wantCode(t, err, codes.NotFound, "nope")
	// Observe: the same fit is reported but no longer prices.
	if _, err := e.Admin.SetPolicy(ctx(t), &pb.SetPolicyRequest{Pool: "m", Policy: &pb.Policy{Calibration: pb.SloCalibration_SLO_CALIBRATION_OBSERVE}}); err != nil {
		t.Fatal(err)
	}
	dec = pick(2001, pb.AuditLevel_AUDIT_LEVEL_FULL).GetDecision()
	if dd := deploymentByName(t, dec, "d"); dec.GetCalibrationVersion() != 0 || dd.GetPrefillScale() != 1 || dd.GetDoublingContextTokens() != 17000 {
		t.Fatalf("observe: decision version %d, deployment %+v; want the prior", dec.GetCalibrationVersion(), dd)
	}

	fams := e.Metrics()
	for _, c := range []struct {
		met  string
		want int
	}{{"true", met}, {"false", missed + 1}} { // the fallback's 5 s missed too
		if v, _ := servertest.MetricValue(fams, "prefixroute_slo_outcomes_total", map[string]string{"pool": "m", "deployment": "d", "met": c.met}); int(v) != c.want {
			t.Errorf("slo outcomes met=%s: %v, want %d", c.met, v, c.want)
		}
	}
	h := fams["prefixroute_ttft_observed_over_predicted"].GetMetric()
	if len(h) != 1 || h[0].GetHistogram().GetSampleCount() != calib.MinSamples+1 {
		t.Fatalf("observed/predicted histogram %v, want %d samples", h, calib.MinSamples+1)
	}
}
