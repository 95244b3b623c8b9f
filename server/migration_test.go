package server_test

import (
	"math"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/durationpb"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/internal/servertest"
)

// TestMigrationStatusScripted drives a pool through real gRPC and checks
// every figure of GetMigrationStatus against the hand-computed one.
//
// Deployment a (weight 1) holds blocks h1..h4, deployment b (weight 0) holds
// h1, h2; one instance each at 16,000 tok/s (16 tok/ms), block size 16. At
// t0 three picks of prompt h1..h4 (64 tokens) and one of h5, h6 (40
// tokens, 2 blocks + 8) all go to a. Status at t0+10s (window covered: 10 s):
//
//	a: 4 picks, prompt 3·64+40 = 232 tok, hit 3·64 = 192 tok (0.8276),
//	   prefill 40 tok = 4 tok/s, 40·(1 + 20/17000)/16 = 2.5029 ms = 0.25029 ms/s
//	   (the attention term of the default doubling context)
//	cached deeper on a than b: 3 requests (0.75), 192 of 232 prompt tokens
//	to_fraction 1 (no weight outside a), moved prefill = a's prefill,
//	40 tok = 4 tok/s,
//	recompute (the picks' blocks b lacks, hashes[matched_b:], all four
//	picks inside the default horizon of window/4 = 75 s): h3, h4 of the
//	first three, h5, h6 of the fourth = 4 · 16 = 64 tok = 6.4 tok/s,
//	extra 10.4 tok/s = 0.65 ms/s on b, b's load 0, capacity 1000 ms/s,
//	headroom 100·(1 − 0.65/1000) = 99.935%
//	hot prefixes cached deeper on a: h1 (3 requests, depth 4 vs 2, 32 tok).
func TestMigrationStatusScripted(t *testing.T) {
	e := servertest.Start(t)
	c := ctx(t)
	setWeights(e, "m", map[string]float64{"a": 1, "b": 0})
	// Hashes are uniform, as prefixhash makes them: the distinct-block count
	// is a HyperLogLog sketch, exact at this size only for random hashes.
	h := []uint64{0x9e3779b97f4a7c15, 0xbf58476d1ce4e5b9, 0x94d049bb133111eb, 0x2545f4914f6cdd1d,
		0xd6e8feb86659fd93, 0xa0761d6478bd642f}
	req := func(dep string, stored []uint64) *pb.ReportLoadRequest {
		r := rep("m", dep, dep+"-0")
		r.PrefillTokensPerSecond, r.BlockSizeTokens, r.ReportsCacheEvents, r.StoredBlockHashes = 16000, 16, true, stored
		return r
	}
	ia, ib := report(e, req("a", h[:4])), report(e, req("b", h[:2]))
	for _, req := range []*pb.PickRequest{
		{Pool: "m", PrefixHashes: h[:4], PromptTokens: 64}, {Pool: "m", PrefixHashes: h[:4], PromptTokens: 64},
		{Pool: "m", PrefixHashes: h[:4], PromptTokens: 64}, {Pool: "m", PrefixHashes: h[4:], PromptTokens: 40},
	} {
		r, err := e.Pick.Pick(c, req)
		if err != nil || r.GetDeployment() != "a" {
			t.Fatalf("pick: %v %v", r.GetDeployment(), err)
		}
	}
	e.Clock.Advance(10 * time.Second)
	ia.send(req("a", nil)) // fresh reports: both eligible at t0+10s
	ib.send(req("b", nil))
	st, err := e.Admin.GetMigrationStatus(c, &pb.GetMigrationStatusRequest{Pool: "m", From: "a", To: "b"})
	if err != nil {
		t.Fatal(err)
	}
	near := func(name string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > 1e-9*math.Max(1, math.Abs(want)) {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	if st.GetPicks() != 4 || st.GetCovered().AsDuration() != 10*time.Second {
		t.Fatalf("picks %d covered %v", st.GetPicks(), st.GetCovered().AsDuration())
	}
	deps := map[string]*pb.DeploymentTraffic{}
	for _, d := range st.GetDeployments() {
		deps[d.GetDeployment()] = d
	}
	a, b := deps["a"], deps["b"]
	if a.GetPicks() != 4 || b.GetPicks() != 0 || a.GetInstances() != 1 || b.GetInstances() != 1 {
		t.Fatalf("deployments: %v", st.GetDeployments())
	}
	near("a traffic share", a.GetTrafficShare(), 1)
	near("a weight share", a.GetWeightShare(), 1)
	near("a hit ratio", a.GetHitRatio(), 192.0/232)
	near("a prefill tok/s", a.GetPrefillTokensPerSecond(), 4)
	near("a prefill ms/s", a.GetPrefillMsPerSecond(), 40*(1+20/17000.0)/16/10)
	near("b throughput", b.GetThroughputTokensPerSecond(), 16000)
	near("from-only request share", st.GetFromOnlyRequestShare(), 0.75)
	near("from-only token share", st.GetFromOnlyTokenShare(), 192.0/232)
	ab := st.GetAbsorption()
	near("to_fraction", ab.GetToFraction(), 1)
	near("moved tok/s", ab.GetMovedPrefillTokensPerSecond(), 4)
	near("recompute tok", ab.GetRecomputeTokens(), 64)
	near("recompute tok/s", ab.GetRecomputeTokensPerSecond(), 6.4)
	near("extra tok/s", ab.GetExtraTokensPerSecond(), 10.4)
	near("extra ms/s", ab.GetExtraPrefillMsPerSecond(), 0.65)
	near("to capacity", ab.GetToCapacityMsPerSecond(), 1000)
	near("headroom", ab.GetHeadroomPct(), 100*(1-0.65/1000))
	// The headroom is known and positive, but 4 picks are below the
	// verdict's minimum sample: no approval on that little evidence.
	if ab.GetCanAbsorb() || !ab.GetThroughputKnown() || st.GetSampleMissing() != "26 more picks (has 4 of the 30 needed)" {
		t.Errorf("can_absorb %v throughput_known %v sample_missing %q", ab.GetCanAbsorb(), ab.GetThroughputKnown(), st.GetSampleMissing())
	}
	hot := st.GetHotPrefixes()
	if len(hot) != 1 || hot[0].GetFirstBlockHash() != h[0] || hot[0].GetRequests() != 3 ||
		hot[0].GetDepthFromBlocks() != 4 || hot[0].GetDepthToBlocks() != 2 || hot[0].GetExtraTokens() != 32 {
		t.Errorf("hot prefixes = %v", hot)
	}

	_, err = e.Admin.GetMigrationStatus(c, &pb.GetMigrationStatusRequest{Pool: "m", From: "a", To: "zz"})
	wantCode(t, err, codes.NotFound, `"zz"`)
	_, err = e.Admin.GetMigrationStatus(c, &pb.GetMigrationStatusRequest{Pool: "m", From: "a", To: "a"})
	wantCode(t, err, codes.InvalidArgument)
	_, err = e.Admin.GetMigrationStatus(c, &pb.GetMigrationStatusRequest{Pool: "m", From: "a"})
	wantCode(t, err, codes.InvalidArgument, "from and to are required")
	_, err = e.Admin.GetMigrationStatus(c, &pb.GetMigrationStatusRequest{Pool: "m", From: "a", To: "b", TopK: 101})
	wantCode(t, err, codes.InvalidArgument, "top_k is 101")
	_, err = e.Admin.GetMigrationStatus(c, &pb.GetMigrationStatusRequest{Pool: "nope", From: "a", To: "b"})
	wantCode(t, err, codes.NotFound)
}

// TestRampAutoHold: a ramp with auto-hold pauses before a step that would
// leave the gaining deployment less headroom than asked, and says why.
//
// As in TestMigrationStatusScripted, but b reports 16 tok/s (0.016 tok/ms):
// taking all of a's traffic would cost b 10.4 / 0.016 = 650 ms/s of prefill.
// The step a:b 1:0 -> 1:1 moves half of a's traffic: 325 ms/s, leaving
// 100·(1 − 325/1000) = 67.5% headroom: below 80%, the ramp holds.
func TestRampAutoHold(t *testing.T) {
	e := servertest.Start(t, manualRamps)
	c := ctx(t)
	setWeights(e, "m", map[string]float64{"a": 1, "b": 0})
	h := []uint64{0x9e3779b97f4a7c15, 0xbf58476d1ce4e5b9, 0x94d049bb133111eb, 0x2545f4914f6cdd1d,
		0xd6e8feb86659fd93, 0xa0761d6478bd642f}
	req := func(dep string, tps float64, stored []uint64) *pb.ReportLoadRequest {
		r := rep("m", dep, dep+"-0")
		r.PrefillTokensPerSecond, r.BlockSizeTokens, r.ReportsCacheEvents, r.StoredBlockHashes = tps, 16, true, stored
		return r
	}
	ia, ib := report(e, req("a", 16000, h[:4])), report(e, req("b", 16, h[:2]))
	for _, req := range []*pb.PickRequest{
		{Pool: "m", PrefixHashes: h[:4], PromptTokens: 64}, {Pool: "m", PrefixHashes: h[:4], PromptTokens: 64},
		{Pool: "m", PrefixHashes: h[:4], PromptTokens: 64}, {Pool: "m", PrefixHashes: h[4:], PromptTokens: 40},
	} {
		if _, err := e.Pick.Pick(c, req); err != nil {
			t.Fatal(err)
		}
	}
	_, err := e.Admin.StartRamp(c, &pb.StartRampRequest{AllowNewPool: true, Pool: "m", AutoHold: &pb.AutoHold{MinHeadroomPct: 80},
		Steps: []*pb.RampStep{{Weights: map[string]float64{"a": 1, "b": 1}, After: durationpb.New(10 * time.Second)}}})
	if err != nil {
		t.Fatal(err)
	}
	e.Clock.Advance(10 * time.Second)
	ia.send(req("a", 16000, nil))
	ib.send(req("b", 16, nil))
	if n := e.D.Server().AdvanceRamps(); n != 0 {
		t.Fatalf("applied %d steps; want the ramp held", n)
	}
	r, err := e.Admin.GetRamp(c, &pb.GetRampRequest{Pool: "m"})
	if err != nil {
		t.Fatal(err)
	}
	if r.GetRamp().GetState() != pb.RampState_RAMP_STATE_PAUSED ||
		r.GetRamp().GetReason() != "auto-hold: step 1 would leave b 67.5% prefill headroom (< 80%)" ||
		r.GetRamp().GetAutoHold().GetFrom() != "a" || r.GetRamp().GetAutoHold().GetTo() != "b" {
		t.Fatalf("ramp = %v", r.GetRamp())
	}
	// Resumed with b faster (160 tok/s: 32.5 ms/s, 96.75% left), it steps.
	ib.send(req("b", 160, nil))
	if _, err := e.Admin.ResumeRamp(c, &pb.ResumeRampRequest{Pool: "m"}); err != nil {
		t.Fatal(err)
	}
	if n := e.D.Server().AdvanceRamps(); n != 1 {
		t.Fatalf("resumed ramp applied %d steps, want 1", n)
	}
}
