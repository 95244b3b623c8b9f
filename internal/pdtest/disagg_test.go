package pdtest

import (
	"context"
	"net/http"
	"strings"
	"testing"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/internal/servertest"
)

// TestDisaggregationEndToEnd: with one disaggregated deployment, a long
// uncached prompt goes prefill leg → prefill engine, decode leg → decode
// engine, which reads the blocks; a short prompt, and the long one again
// (now cached on the decode engine), prefill locally. Then two
// deployments weighted 1:9 keep that split, each pick pairing a decode
// and a prefill of the same deployment. Then a killed prefill engine:
// local fallback (pd_fallback local), then 503 (pd_fallback fail).
func TestDisaggregationEndToEnd(t *testing.T) {
	sc := servertest.Start(t)
	a := startDeployment(t, sc, "a")
	waitInstances(t, sc, 2, pb.InstanceState_INSTANCE_STATE_OK)
	list, err := sc.Admin.ListInstances(context.Background(), &pb.ListInstancesRequest{Pool: "llama"})
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range list.GetInstances() {
		if want := map[string]pb.PdRole{"a-prefill": pb.PdRole_PD_ROLE_PREFILL, "a-decode": pb.PdRole_PD_ROLE_DECODE}[in.GetInstanceId()]; in.GetRole() != want {
			t.Fatalf("ListInstances: %s has role %v, want %v", in.GetInstanceId(), in.GetRole(), want)
		}
	}

	r := route(t, sc, long("first"))
	if r.status != http.StatusNoContent || r.dest != a.side.Addr || r.pre != a.pre.Addr {
		t.Fatalf("long prompt: %d, destination %q, prefiller %q; want 204, %s, %s (%s)", r.status, r.dest, r.pre, a.side.Addr, a.pre.Addr, r.errBody)
	}
	if r.answerState != http.StatusOK || r.answer != "decoded after remote prefill" || a.pre.PrefillLegs.Load() != 1 ||
		a.dec.RemotePrefills.Load() != 1 || a.side.PrefillLegs.Load() != 1 {
		t.Fatalf("long prompt: answer %d %q; prefill legs %d, remote prefills %d", r.answerState, r.answer, a.pre.PrefillLegs.Load(), a.dec.RemotePrefills.Load())
	}
	for _, tc := range []struct{ name, prompt string }{
		{"short prompt (below pd_min_uncached_tokens)", "hello there"},
		{"the long prompt again (cached on the decode engine)", long("first")},
	} {
		local := a.dec.LocalPrefills.Load()
		r := route(t, sc, tc.prompt)
		if r.status != http.StatusNoContent || r.dest != a.side.Addr || r.pre != "" || r.answer != "decoded after local prefill" ||
			a.dec.LocalPrefills.Load() != local+1 {
			t.Fatalf("%s: %d, destination %q, prefiller %q, answer %q", tc.name, r.status, r.dest, r.pre, r.answer)
		}
	}
	if n := pdDecisions(sc, "disaggregated"); n != 1 {
		t.Fatalf("prefixroute_pick_pd_decisions{reason=disaggregated} = %v, want 1", n)
	}
	if n := pdDecisions(sc, "below_threshold"); n != 2 {
		t.Fatalf("prefixroute_pick_pd_decisions{reason=below_threshold} = %v, want 2", n)
	}

	// Weights 1:9 across two disaggregated deployments.
	b := startDeployment(t, sc, "b")
	waitInstances(t, sc, 4, pb.InstanceState_INSTANCE_STATE_OK)
	setWeights(t, sc, map[string]float64{"a": 1, "b": 9})
	byDep := map[string]*deployment{"a": a, "b": b}
	counts, disagg := map[string]int{}, 0
	const n = 300
	for i := range n {
		r := route(t, sc, long(strings.Repeat("x", i%7)+string(rune('A'+i%26))+strings.Repeat("y", i)))
		d := byDep[r.deployment]
		first, fallbacks, _ := strings.Cut(r.dest, ",")
		if r.status != http.StatusNoContent || d == nil || first != d.side.Addr || r.answerState != http.StatusOK {
			t.Fatalf("pick %d: %d, deployment %q, destination %q: %s", i, r.status, r.deployment, r.dest, r.errBody)
		}
		if r.pre != "" {
			if fallbacks != "" { // a's and b's deployments have one decode instance each
				t.Fatalf("pick %d: disaggregated with fallbacks %q in another deployment", i, fallbacks)
			}
			disagg++
			if r.pre != d.pre.Addr {
				t.Fatalf("pick %d: decode of %s paired with prefiller %s, not its deployment's %s", i, d.name, r.pre, d.pre.Addr)
			}
		}
		counts[r.deployment]++
	}
	// P(a) = 0.1: 30 of 300 expected, sd 5.2; [10, 55] is beyond 3.8 sd.
	if counts["a"] < 10 || counts["a"] > 55 || disagg < n/2 {
		t.Fatalf("1:9 weights: %v over %d picks (want about 30 a), %d disaggregated (want most)", counts, n, disagg)
	}
	t.Logf("1:9 weights: %v, %d of %d disaggregated", counts, disagg, n)

	// Kill b's prefill engine; drain a so that every pick draws b.
	setWeights(t, sc, map[string]float64{"a": 0, "b": 1})
	if err := b.pre.Close(); err != nil {
		t.Fatal(err)
	}
	waitInstances(t, sc, 1, pb.InstanceState_INSTANCE_STATE_DISCONNECTED)
	local := b.dec.LocalPrefills.Load()
	r = route(t, sc, long("after the prefill engine died"))
	if r.status != http.StatusNoContent || r.dest != b.side.Addr || r.pre != "" || r.answer != "decoded after local prefill" ||
		b.dec.LocalPrefills.Load() != local+1 {
		t.Fatalf("killed prefill, pd_fallback local: %d, destination %q, prefiller %q, answer %q (%s)", r.status, r.dest, r.pre, r.answer, r.errBody)
	}
	if pdDecisions(sc, "no_prefill_instance") != 1 {
		t.Fatalf("prefixroute_pick_pd_decisions{reason=no_prefill_instance} = %v, want 1", pdDecisions(sc, "no_prefill_instance"))
	}
	if _, err := sc.Admin.SetPolicy(context.Background(), &pb.SetPolicyRequest{Pool: "llama",
		Policy: &pb.Policy{PdFallback: pb.PdFallback_PD_FALLBACK_FAIL}}); err != nil {
		t.Fatal(err)
	}
	r = route(t, sc, long("fail rather than prefill on decode"))
	if r.status != http.StatusServiceUnavailable || !strings.Contains(r.errBody, `deployment \"b\": 1 prefill instances, none eligible (pd_fallback: fail)`) {
		t.Fatalf("killed prefill, pd_fallback fail: %d %s; want 503 naming the deployment", r.status, r.errBody)
	}
	// A short prompt needs no prefill instance: still served.
	if r := route(t, sc, "short"); r.status != http.StatusNoContent || r.pre != "" {
		t.Fatalf("short prompt under pd_fallback fail: %d %s", r.status, r.errBody)
	}
}

// setWeights sets the pool's weights (draining allowed).
func setWeights(t *testing.T, sc *servertest.Sidecar, w map[string]float64) {
	t.Helper()
	if _, err := sc.Admin.SetWeights(context.Background(), &pb.SetWeightsRequest{Pool: "llama", Weights: w, AllowDrain: true, AllowNewPool: true}); err != nil {
		t.Fatal(err)
	}
}

// pdDecisions is prefixroute_pick_pd_decisions_total{pool=llama, reason}.
func pdDecisions(sc *servertest.Sidecar, reason string) float64 {
	for _, m := range sc.Metrics()["prefixroute_pick_pd_decisions_total"].GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if labels["pool"] == "llama" && labels["reason"] == reason {
			return m.GetCounter().GetValue()
		}
	}
	return 0
}
