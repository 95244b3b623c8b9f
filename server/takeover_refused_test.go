package server_test

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
)

// TestTakeoverRefused is the security review's F1 through the public API:
// an identity bound to deployment b of pool P reports the id of a live
// instance of deployment a (as b). The report is refused with
// PermissionDenied naming the instance, its deployment and the binding;
// the victim's stream goes on, the instance stays in a with its address,
// a keeps its share of Picks, and the refusal is logged and counted.
func TestTakeoverRefused(t *testing.T) {
	cases := []struct {
		name             string
		victim, attacker string
		batch            bool // the attacker uses ReportLoadBatch
		victimGone       bool // the victim's stream ended before the attack
	}{
		{"deployment binding takes a deployment's instance", "inst-pa", "inst-pb", false, false},
		{"victim bound to its exact instance", "inst-pa-a1", "inst-pb", false, false},
		{"attacker bound to the exact instance id", "inst-pa", "inst-pb-a1", false, false},
		{"over ReportLoadBatch", "inst-pa", "inst-pb", true, false},
		{"over ReportLoadBatch against an exact binding", "inst-pa-a1", "inst-pb-a1", true, false},
		{"victim disconnected, not yet forgotten", "inst-pa", "inst-pb", false, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := startTakeover(t, nil)
			victim, err := e.report(tc.victim, "a", "a-1")
			if err != nil {
				t.Fatalf("victim: %v", err)
			}
			if _, err := e.report("inst-pb", "b", "b-1"); err != nil {
				t.Fatalf("b-1: %v", err)
			}
			before := e.where()
			if tc.victimGone {
				if err := victim.CloseSend(); err != nil {
					t.Fatal(err)
				}
				if _, err := victim.Recv(); err == nil {
					t.Fatal("victim stream: want its end")
				}
			}

			var code codes.Code
			if tc.batch {
				code = e.batchReport(tc.attacker, "b", "a-1")
			} else {
				_, err = e.report(tc.attacker, "b", "a-1")
				code = status.Code(err)
				msg := status.Convert(err).Message()
				for _, want := range []string{`"a-1"`, `deployment "a"`, tc.attacker, `deployment "b"`} {
					if !strings.Contains(msg, want) {
						t.Errorf("refusal %q does not name %s", msg, want)
					}
				}
			}
			if code != codes.PermissionDenied {
				t.Fatalf("attacker's report: %v, want PermissionDenied", code)
			}
			if after := e.where(); after["a-1"] != before["a-1"] || after["b-1"] != before["b-1"] {
				t.Fatalf("instances after the refusal %q, before %q", after, before)
			}
			if !tc.victimGone {
				// The victim's stream was not ended: its next report is acked.
				if err := victim.Send(&pb.ReportLoadRequest{Seq: 2, PrefillTokensPerSecond: 1000}); err != nil {
					t.Fatalf("victim send: %v", err)
				}
				if _, err := victim.Recv(); err != nil {
					t.Fatalf("victim stream ended by the refused takeover: %v", err)
				}
				if got := e.picks(40); got["a"] == 0 {
					t.Fatalf("picks after the refusal %v: deployment a lost its share", got)
				}
			}
			if got := e.takeovers("refused"); got != 1 {
				t.Errorf("takeovers{outcome=refused} = %v, want 1", got)
			}
			if got := e.takeovers("moved"); got != 0 {
				t.Errorf("takeovers{outcome=moved} = %v, want 0", got)
			}
			log := e.log.String()
			if !strings.Contains(log, "level=WARN") || !strings.Contains(log, "identity="+tc.attacker) ||
				!strings.Contains(log, "from_deployment=a") || !strings.Contains(log, "to_deployment=b") {
				t.Errorf("no WARN line names the refused takeover:\n%s", log)
			}
		})
	}
}

// TestTakeoverAllowed: an identity whose binding covers the instance where
// it lives (unbound, or bound to the pool only) may still move it to
// another deployment, as a redeploy does; the move is logged and counted,
// and the old stream ends Aborted.
func TestTakeoverAllowed(t *testing.T) {
	for _, mover := range []string{"inst-any", "inst-p"} {
		t.Run(mover, func(t *testing.T) {
			e := startTakeover(t, nil)
			old, err := e.report(mover, "a", "a-1")
			if err != nil {
				t.Fatalf("first: %v", err)
			}
			if _, err := e.report(mover, "b", "a-1"); err != nil {
				t.Fatalf("move: %v", err)
			}
			if got := e.where()["a-1"]; !strings.HasPrefix(got, "b ") {
				t.Fatalf("a-1 after the move: %q, want deployment b", got)
			}
			if _, err := old.Recv(); status.Code(err) != codes.Aborted {
				t.Fatalf("old stream: %v, want Aborted", err)
			}
			if got := e.takeovers("moved"); got != 1 {
				t.Errorf("takeovers{outcome=moved} = %v, want 1", got)
			}
			if log := e.log.String(); !strings.Contains(log, "moved an instance id") || !strings.Contains(log, "identity="+mover) {
				t.Errorf("no WARN line names the move:\n%s", log)
			}
		})
	}
}

// TestTakeoverSameDeployment: a bound identity still takes over its own
// instance (a reconnect before the old stream's end was noticed), and that
// counts as replaced.
func TestTakeoverSameDeployment(t *testing.T) {
	e := startTakeover(t, nil)
	old, err := e.report("inst-pa-a1", "a", "a-1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.report("inst-pa", "a", "a-1"); err != nil {
		t.Fatalf("reconnect: %v", err)
	}
	if _, err := old.Recv(); status.Code(err) != codes.Aborted {
		t.Fatalf("old stream: %v, want Aborted", err)
	}
	if got := e.takeovers("replaced"); got != 1 {
		t.Errorf("takeovers{outcome=replaced} = %v, want 1", got)
	}
}
