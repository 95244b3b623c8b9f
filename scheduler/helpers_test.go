package scheduler_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/prefixroute/prefixroute/scheduler"
)

// seqRNG returns its values in turn (then 0) and counts the calls.
type seqRNG struct {
	vals  []float64
	calls int
}

func (r *seqRNG) Float64() float64 {
	r.calls++
	if len(r.vals) == 0 {
		return 0
	}
	v := r.vals[0]
	r.vals = r.vals[1:]
	return v
}

// draws returns an RNG that yields vals in turn.
func draws(vals ...float64) *seqRNG { return &seqRNG{vals: vals} }

// q returns an eligible instance of deployment dep whose cost is exactly
// queueMs for a request with no prompt tokens.
func q(dep int, queueMs float64) scheduler.Instance {
	return scheduler.Instance{
		ID:         fmt.Sprintf("d%d-q%g", dep, queueMs),
		Deployment: dep,
		HasQueueMs: true,
		QueueMs:    queueMs,
	}
}

// hit returns q(dep, queueMs) with matched blocks.
func hit(dep int, queueMs float64, matched int) scheduler.Instance {
	in := q(dep, queueMs)
	in.MatchedBlocks = matched
	return in
}

// deps returns deployments "A", "B", ... with the given weights.
func deps(weights ...float64) []scheduler.Deployment {
	out := make([]scheduler.Deployment, len(weights))
	for k, w := range weights {
		out[k] = scheduler.Deployment{Name: string(rune('A' + k)), Weight: w}
	}
	return out
}

// policy returns DefaultPolicy modified by f (when not nil).
func policy(f func(*scheduler.Policy)) *scheduler.Policy {
	p := scheduler.DefaultPolicy()
	if f != nil {
		f(&p)
	}
	return &p
}

// decide runs Decide with draws 0, 0 and fails the test on error.
func decide(t testing.TB, p *scheduler.Policy, req scheduler.Request, snap *scheduler.Snapshot) *scheduler.Decision {
	t.Helper()
	var d scheduler.Decision
	if err := scheduler.Decide(p, req, snap, draws(0, 0), &d); err != nil {
		t.Fatalf("Decide: %v", err)
	}
	return &d
}

// near fails the test unless |got-want| <= tol.
func near(t testing.TB, what string, got, want, tol float64) {
	t.Helper()
	if !(math.Abs(got-want) <= tol) {
		t.Errorf("%s = %.17g, want %.17g (±%g)", what, got, want, tol)
	}
}

// checkInvariants checks what every successful or failed decision must
// satisfy: finite non-negative probabilities, P(d) summing to 1 over the
// pool, P(i|d) summing to 1 within each deployment with an eligible
// instance, Joint = P(d)P(i|d), reasons consistent with probabilities, a
// chosen pair with positive probability, and Excluded matching the reasons.
func checkInvariants(t testing.TB, snap *scheduler.Snapshot, d *scheduler.Decision, err error, tol float64) {
	t.Helper()
	if len(d.Deployments) != len(snap.Deployments) || len(d.Instances) != len(snap.Instances) {
		t.Fatalf("audit sizes %d/%d, want %d/%d", len(d.Deployments), len(d.Instances), len(snap.Deployments), len(snap.Instances))
	}
	var counts [scheduler.NumReasons]int
	perDep := make([]float64, len(snap.Deployments))
	for i, r := range d.Instances {
		for _, v := range []float64{r.Probability, r.Joint, r.CostMs, r.PrefillMs, r.QueueMs, r.BatchWaitMs} {
			if !(v >= 0 && v <= math.MaxFloat64) {
				t.Fatalf("instance %d: bad figure %v in %+v", i, v, r)
			}
		}
		if r.Reason != scheduler.ReasonNone {
			counts[r.Reason]++
			if r.Probability != 0 || r.Joint != 0 {
				t.Fatalf("instance %d: reason %v with probability %v", i, r.Reason, r.Probability)
			}
		}
		perDep[snap.Instances[i].Deployment] += r.Probability
		pd := d.Deployments[snap.Instances[i].Deployment].Probability
		if math.Abs(r.Joint-pd*r.Probability) > 1e-300 {
			t.Fatalf("instance %d: joint %v != %v*%v", i, r.Joint, pd, r.Probability)
		}
	}
	if counts != d.Excluded {
		t.Fatalf("Excluded = %v, reasons count %v", d.Excluded, counts)
	}
	if err != nil {
		if d.Deployment != -1 || d.Instance != -1 {
			t.Fatalf("error %v with choice %d/%d", err, d.Deployment, d.Instance)
		}
		return
	}
	total := 0.0
	for k, dr := range d.Deployments {
		if !(dr.Probability >= 0 && dr.Probability <= 1) {
			t.Fatalf("deployment %d: P(d) = %v", k, dr.Probability)
		}
		if dr.Reason != scheduler.ReasonNone && dr.Probability != 0 {
			t.Fatalf("deployment %d: reason %v with P(d) %v", k, dr.Reason, dr.Probability)
		}
		total += dr.Probability
		if dr.Eligible > 0 && math.Abs(perDep[k]-1) > tol {
			t.Fatalf("deployment %d: sum P(i|d) = %.17g", k, perDep[k])
		}
		if dr.Eligible == 0 && perDep[k] != 0 {
			t.Fatalf("deployment %d: no eligible instance but sum P(i|d) = %v", k, perDep[k])
		}
	}
	if math.Abs(total-1) > tol {
		t.Fatalf("sum P(d) = %.17g", total)
	}
	if d.Deployment < 0 || d.Instance < 0 || d.Deployments[d.Deployment].Probability <= 0 ||
		d.Instances[d.Instance].Probability <= 0 || snap.Instances[d.Instance].Deployment != d.Deployment {
		t.Fatalf("bad choice %d/%d", d.Deployment, d.Instance)
	}
}
