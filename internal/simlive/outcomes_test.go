package simlive

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prefixroute/prefixroute/internal/sim"
	"github.com/prefixroute/prefixroute/internal/simout"
)

// parseSLO is tinyYAML with two more variants: learn reports every TTFT
// (outcomes: true), shed refuses picks whose target no instance meets.
func parseSLO(t *testing.T, target float64) *sim.Scenario {
	t.Helper()
	y := strings.Replace(tinyYAML, "  - {name: softmax}\n",
		"  - {name: softmax}\n  - {name: learn, outcomes: true}\n  - {name: shed, policy: {on_slo_miss: shed}}\n", 1)
	sc, err := sim.ParseScenario([]byte(y))
	if err != nil {
		t.Fatalf("ParseScenario: %v", err)
	}
	sc.Workload.TTFTSLOMs = target
	return sc
}

// TestLiveOutcomes: a live variant with outcomes: true picks with the
// workload's target, records the router's predicted TTFT of every choice,
// and reports every served request's TTFT with its pick's request_id: the
// router's fit has taken exactly one sample (accepted or ignored) per
// served request, which it does only for an outcome that matched a pick.
// Before, the live mode refused outcomes: true and sent no target.
func TestLiveOutcomes(t *testing.T) {
	const target = 60000 // ms, beyond the run's deadline (2 s + 30 s): every served request meets it
	sc := parseSLO(t, target)
	addr := startDaemon(t, 50*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := RunLive(ctx, sc, "learn", Options{Addr: addr, Duration: 2 * time.Second, Workers: 4})
	if err != nil {
		t.Fatal(err)
	}
	l, n := res.Live, len(res.Records)
	if l.PickErrors != 0 || l.Shed != 0 || len(res.Rejected) != 0 || l.Unfinished != 0 || n != res.Generated || n < 50 {
		t.Fatalf("%d pick errors (first: %s), %d shed, %d rejected, %d unfinished, served %d of %d", l.PickErrors, l.FirstError,
			l.Shed, len(res.Rejected), l.Unfinished, n, res.Generated)
	}
	for _, r := range res.Records {
		if r.TargetMs != target || !(r.PredictedMs > 0) || !(r.PredictedQueueMs >= 0 && r.PredictedQueueMs < r.PredictedMs) {
			t.Fatalf("request %d: target %v ms, predicted %v ms (queue %v ms); want %v, > 0 and a queue in [0, predicted)",
				r.ID, r.TargetMs, r.PredictedMs, r.PredictedQueueMs, target)
		}
	}
	o := l.Outcomes
	if o == nil || o.Sent != uint64(n) || o.Dropped != 0 || o.Failed != 0 {
		t.Fatalf("outcomes %+v; want %d sent, none dropped or failed", o, n)
	}
	var fed uint64
	for _, f := range o.Fits {
		fed += f.Accepted + f.Ignored
	}
	if fed != uint64(n) {
		t.Fatalf("the router's fits took %d outcomes (%+v); want %d, one per served request", fed, o.Fits, n)
	}
	p := simout.Summarise(res).Prediction
	if p.N != n || p.WithTarget != n || p.Met != n || p.Shed != 0 {
		t.Fatalf("prediction %+v; want %d predicted, with target and met", p, n)
	}
}

// TestLiveShed: with on_slo_miss shed and a target no prefill can meet
// (1 µs), every pick is refused with RESOURCE_EXHAUSTED, reason
// SLO_UNATTAINABLE: counted as shed, not as errors, and each request as
// rejected with its target.
func TestLiveShed(t *testing.T) {
	sc := parseSLO(t, 0.001)
	addr := startDaemon(t, 50*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := RunLive(ctx, sc, "shed", Options{Addr: addr, Duration: time.Second, Workers: 4})
	if err != nil {
		t.Fatal(err)
	}
	l := res.Live
	if l.PickErrors != 0 || l.Shed != res.Generated || l.ShedSLO != res.Generated || l.Picks != res.Generated ||
		len(res.Rejected) != res.Generated || len(res.Records) != 0 || res.Generated < 20 {
		t.Fatalf("%d picks, %d errors (first: %s), %d shed (%d slo), %d rejected, %d served of %d", l.Picks, l.PickErrors, l.FirstError,
			l.Shed, l.ShedSLO, len(res.Rejected), len(res.Records), res.Generated)
	}
	if p := simout.Summarise(res).Prediction; p.Shed != res.Generated || p.WithTarget != 0 || l.Outcomes != nil {
		t.Fatalf("prediction %+v, outcomes %+v; want %d shed, none served, no outcomes", p, l.Outcomes, res.Generated)
	}
}
