package sim

import (
	"slices"
	"testing"
	"time"
)

// flowRun runs every variant of scenario name and returns each variant's
// class stats over the burst (20 s to 50 s), and, for the variants named
// in unloaded, the same at the scenario's base rate throughout.
func flowRun(t *testing.T, name string, unloaded ...string) (burst, base map[string][]ClassStats) {
	burst, base, _ = flowRunAll(t, name, unloaded...)
	return burst, base
}

// flowRunAll is flowRun that also returns each variant's Result.
func flowRunAll(t *testing.T, name string, unloaded ...string) (burst, base map[string][]ClassStats, full map[string]*Result) {
	t.Helper()
	sc, err := LoadScenario(name)
	if err != nil {
		t.Fatal(err)
	}
	burst, base, full = map[string][]ClassStats{}, map[string][]ClassStats{}, map[string]*Result{}
	logStats := func(variant string, stats []ClassStats) {
		for _, cs := range stats {
			t.Logf("%s %-16s %-11s served %5d rejected %5d ttft p50 %8v p99 %8v router wait p99 %8v tokens %d max ahead %.0f ms", name, variant, cs.Class,
				cs.Served, cs.Rejected, cs.TTFTp50.Round(time.Millisecond), cs.TTFTp99.Round(time.Millisecond),
				cs.RouterWaitP99.Round(time.Millisecond), cs.DispatchedTokens, cs.MaxAheadMs)
		}
	}
	for _, v := range sc.Variants {
		res, err := Run(sc, v.Name, RunOptions{})
		if err != nil {
			t.Fatalf("%s: %v", v.Name, err)
		}
		burst[v.Name] = ClassWindow(res, 20*time.Second, 50*time.Second)
		full[v.Name] = res
		logStats(v.Name, burst[v.Name])
		for c, n := range res.Contended {
			sh, total := ContendedShare(res, c)
			t.Logf("%s %-16s %-11s contended tokens %d of %d (%.1f %%)", name, v.Name, res.Classes[c], n, total, 100*sh)
		}
	}
	sc.Workload.RateSchedule = []RateStep{{At: 0, Rate: sc.Workload.RateSchedule[0].Rate}}
	for _, v := range sc.Variants {
		if !slices.Contains(unloaded, v.Name) {
			continue
		}
		res, err := Run(sc, v.Name, RunOptions{})
		if err != nil {
			t.Fatal(err)
		}
		base[v.Name] = ClassWindow(res, 20*time.Second, 50*time.Second)
		logStats(v.Name+" unloaded", base[v.Name])
	}
	return burst, base, full
}

// TestOverloadFlowControl: the burst (overload.yaml, about 130 %
// of capacity for 30 s). Under on_saturation queue the interactive class
// (priority 10) is never rejected; with max_queue_ms 50 its TTFT p99 stays
// within 1.5x its p99 at the base rate (with 100 ms it is 1.54x: the
// engines' queue limit is most of it). least_loaded lets it queue behind
// the batch class and shed rejects it.
func TestOverloadFlowControl(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 7 simulations")
	}
	got, base := flowRun(t, "overload", "queue", "queue-50ms")
	for _, v := range []string{"queue", "queue-50ms"} {
		if q := got[v][0]; q.Class != "interactive" || q.Rejected != 0 {
			t.Errorf("%s: interactive rejected %d, want 0", v, q.Rejected)
		}
	}
	if q, b := got["queue-50ms"][0], base["queue-50ms"][0]; q.TTFTp99 > b.TTFTp99*3/2 {
		t.Errorf("queue-50ms: interactive ttft p99 %v, want <= 1.5 x %v", q.TTFTp99, b.TTFTp99)
	}
	if ll, shed := got["least_loaded"][0], got["shed"][0]; ll.TTFTp99 <= 2*base["queue"][0].TTFTp99 || shed.Rejected == 0 {
		t.Errorf("the burst does not overload: least_loaded interactive p99 %v, shed rejected %d", ll.TTFTp99, shed.Rejected)
	}
}

// TestNoisyTenant: a tenant with 5x another's traffic in one band
// (noisy.yaml). Under queue the quiet tenant is never rejected, gets all
// the tokens it asks for, and its TTFT p99 is below least_loaded's and the
// llm-d-style gate's; the noisy one absorbs the wait and the rejections.
// (Its p99 is 1.84x its p99 at the base rate: not the 1.5x.)
func TestNoisyTenant(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 5 simulations")
	}
	got, base := flowRun(t, "noisy", "queue", "queue-50ms")
	for _, v := range []string{"queue", "queue-50ms"} {
		t.Logf("%s: quiet ttft p99 %v, %.2f x its base %v", v, got[v][1].TTFTp99, float64(got[v][1].TTFTp99)/float64(base[v][1].TTFTp99), base[v][1].TTFTp99)
	}
	if q, b := got["queue-50ms"][1], base["queue-50ms"][1]; q.TTFTp99 > b.TTFTp99*3/2 {
		t.Errorf("queue-50ms: quiet ttft p99 %v, want <= 1.5 x %v", q.TTFTp99, b.TTFTp99)
	}
	quiet := got["queue"][1]
	if quiet.Class != "quiet" || quiet.Rejected != 0 || quiet.DispatchedTokens < got["least_loaded"][1].DispatchedTokens*99/100 {
		t.Errorf("queue: quiet rejected %d, %d tokens dispatched (least_loaded %d); want 0 and all", quiet.Rejected,
			quiet.DispatchedTokens, got["least_loaded"][1].DispatchedTokens)
	}
	for _, v := range []string{"least_loaded", "llm-d-gate"} {
		if quiet.TTFTp99 >= got[v][1].TTFTp99 {
			t.Errorf("queue: quiet ttft p99 %v, not below %s's %v", quiet.TTFTp99, v, got[v][1].TTFTp99)
		}
	}
}

// TestNoisyBothBacklogged: noisy-both.yaml, a burst in which both tenants
// are backlogged. Under queue the noisy tenant (5x the quiet one's
// requests) gets at most 55 % of the prompt tokens dispatched while both
// have picks waiting (Result.Contended). (It was 54.5 % and 55.6 % before
// flowq refunded a requeued grant that was its flow's last ticket.)
func TestNoisyBothBacklogged(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 4 simulations")
	}
	_, _, full := flowRunAll(t, "noisy-both")
	for _, v := range []string{"queue", "queue-50ms"} {
		sh, total := ContendedShare(full[v], 0)
		if full[v].Classes[0] != "noisy" || total < 10_000_000 || sh > 0.55 {
			t.Errorf("%s: noisy share of contended tokens %.3f of %d, want <= 0.55 of >= 10 M", v, sh, total)
		}
	}
}

// TestDispatchWithinLimit: the exact queue each request joined on its
// simulated instance (Record.AheadMs) against max_queue_ms, over the noisy
// burst. With engines that have no per-batch overhead the router's own
// accounting is exact and no placement joins more than the limit; with the
// scenario's 10 ms a batch, which the router's accounting of dispatched
// work does not count, some do (the figures are logged for
// docs/flow-control.md).
func TestDispatchWithinLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 4 simulations")
	}
	for _, overhead := range []time.Duration{0, 10 * time.Millisecond} {
		for _, v := range []string{"queue", "queue-50ms"} {
			sc, err := LoadScenario("noisy")
			if err != nil {
				t.Fatal(err)
			}
			sc.Deployments[0].BatchOverhead = Duration(overhead)
			res, err := Run(sc, v, RunOptions{})
			if err != nil {
				t.Fatal(err)
			}
			lim := res.Policy.MaxQueueMs
			a := AdmissionWindow(res, 20*time.Second, 50*time.Second, lim)
			t.Logf("batch overhead %v, %s (max_queue_ms %v): %d placed, longest queue joined %.1f ms (%+.0f %%), %d (%.1f %%) over 1.05 x",
				overhead, v, lim, a.Placed, a.MaxMs, 100*(a.MaxMs/lim-1), a.Over5, 100*float64(a.Over5)/float64(a.Placed))
			if a.Placed < 3000 {
				t.Errorf("%s: %d placed in the burst, want >= 3000", v, a.Placed)
			}
			if overhead == 0 && a.MaxMs > lim+1e-3 {
				t.Errorf("no batch overhead, %s: a placement joined %.3f ms, want <= %v ms", v, a.MaxMs, lim)
			}
		}
	}
}

// TestKVBoundProjection: kvbound.yaml, a pool bound by KV memory under
// on_saturation: queue and max_kv_usage 0.9. The router projects each
// instance's KV use from the blocks it sent since the report, so a report
// that frees some KV releases only the waiting picks that fit; when the
// instances report no kv_capacity_blocks it cannot, and every report under
// 0.9 releases the queue onto the engines (the simulated engines do not
// refuse work for KV: their peak use goes over 1).
func TestKVBoundProjection(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 2 simulations")
	}
	peak := map[bool]float64{}
	for _, hide := range []bool{false, true} {
		sc, err := LoadScenario("kvbound")
		if err != nil {
			t.Fatal(err)
		}
		sc.Deployments[0].NoKVCapacity = hide
		res, err := Run(sc, "queue", RunOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, in := range res.Instances {
			peak[hide] = max(peak[hide], in.PeakKVUsage)
		}
		cs := ClassWindow(res, 20*time.Second, 50*time.Second)[0]
		t.Logf("no_kv_capacity %v: peak KV use %.3f of capacity (max_kv_usage 0.9); burst served %d rejected %d ttft p50 %v p99 %v",
			hide, peak[hide], cs.Served, cs.Rejected, cs.TTFTp50.Round(time.Millisecond), cs.TTFTp99.Round(time.Millisecond))
	}
	// Exact for seed 1: 0.982 and 2.271. Projected, the peak stays within
	// the engines' KV (the rest over 0.9 is the blocks the projection does
	// not count: cached prefix blocks and the answers').
	if peak[false] > 1 || peak[true] < 1.5 {
		t.Errorf("peak KV use %.3f projected, %.3f not; want <= 1 and >= 1.5", peak[false], peak[true])
	}
}
