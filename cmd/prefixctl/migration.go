package main

import (
	"context"
	"fmt"
	"io"
	"math"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/spf13/pflag"
)

// migration is 'prefixctl migration POOL --from A --to B [--top N] [--check]'.
func (c *cli) migration(fs *pflag.FlagSet) runner {
	from := fs.String("from", "", "the deployment to retire (`A`)")
	to := fs.String("to", "", "the deployment to take its traffic (`B`)")
	top := fs.Uint("top", 10, "hot prefixes to list, at most 100")
	check := fs.Bool("check", false, "exit 5 unless B can absorb A's traffic (for CD pipelines); also when the window holds too few picks (< 30) or too little time (< 1s) for a verdict")
	return func(pos []string) error {
		if *from == "" || *to == "" {
			return usagef("name both deployments: --from A --to B")
		}
		var resp *pb.GetMigrationStatusResponse
		err := adminCall(c, func(ctx context.Context, a pb.AdminServiceClient) (*pb.GetMigrationStatusResponse, error) {
			r, err := a.GetMigrationStatus(ctx, &pb.GetMigrationStatusRequest{Pool: pos[0], From: *from, To: *to, TopK: uint32(*top)})
			resp = r
			return r, err
		}, renderMigration)
		if err == nil && *check && !resp.GetAbsorption().GetCanAbsorb() {
			return &exitError{code: exitNotReady, msg: verdict(resp)}
		}
		return err
	}
}

// verdict is the one-line answer: can To take From's traffic now?
func verdict(r *pb.GetMigrationStatusResponse) string {
	a := r.GetAbsorption()
	extra := "+" + fmtRate(a.GetExtraTokensPerSecond(), "prefill tok/s")
	switch {
	case r.GetPicks() == 0:
		return fmt.Sprintf("unknown: no picks in the window yet; ask again once %s has had traffic", r.GetPool())
	case r.GetSampleMissing() != "":
		return fmt.Sprintf("unknown: too little evidence in the window: it needs %s; ask again once %s has had more traffic",
			r.GetSampleMissing(), r.GetPool())
	case !a.GetThroughputKnown() || a.GetToCapacityMsPerSecond() <= 0:
		return fmt.Sprintf("unknown: %s has no eligible instance reporting its prefill throughput", r.GetTo())
	case a.GetCanAbsorb():
		return fmt.Sprintf("%s can absorb %s's traffic: %s, %s%% headroom left", r.GetTo(), r.GetFrom(), extra,
			trim(a.GetHeadroomPct(), 1))
	}
	need := 100 - a.GetHeadroomPct()
	return fmt.Sprintf("not yet: %s would run at %s%% of its prefill capacity (+%s)",
		r.GetTo(), trim(need, 0), fmtRate(a.GetExtraTokensPerSecond(), "tok/s"))
}

// renderMigration prints GetMigrationStatus: the deployments' window, the
// estimate and the verdict, then the hot prefixes. Loads are in plain units:
// tokens/s, and BUSY the share of the deployment's prefill capacity (its
// prefill time per second over 1 s per eligible instance).
func capacityPct(msPerSec float64, instances uint32) string {
	if instances == 0 {
		return "-"
	}
	return trim(100*msPerSec/(1000*float64(instances)), 1) + "%"
}

// renderMigration prints GetMigrationStatus.
func renderMigration(w io.Writer, r *pb.GetMigrationStatusResponse) {
	win, cov := r.GetWindow().AsDuration(), r.GetCovered().AsDuration()
	seen := 0.0
	if win > 0 {
		seen = float64(cov) / float64(win)
	}
	fmt.Fprintf(w, "pool %s: %s -> %s, window %v: saw %v of it (%s), %d picks\n", r.GetPool(), r.GetFrom(), r.GetTo(),
		win, roundWait(cov), fmtPct(seen), r.GetPicks())
	t := newTable(nameCol("DEPLOYMENT", 10), numCol("WEIGHT"), numCol("TRAFFIC"), numCol("HIT"), numCol("PREFILL"),
		numCol("BUSY"), numCol("INST"))
	for _, d := range r.GetDeployments() {
		t.add(d.GetDeployment(), fmtPct(d.GetWeightShare()), fmtPct(d.GetTrafficShare()), fmtPct(d.GetHitRatio()),
			fmtRate(d.GetPrefillTokensPerSecond(), "tok/s"), capacityPct(d.GetPrefillMsPerSecond(), d.GetInstances()), fmt.Sprint(d.GetInstances()))
	}
	t.write(w)
	a := r.GetAbsorption()
	fmt.Fprintf(w, "cached deeper on %s than on %s: %s of requests, %s of prompt tokens\n", r.GetFrom(), r.GetTo(),
		fmtPct(r.GetFromOnlyRequestShare()), fmtPct(r.GetFromOnlyTokenShare()))
	fmt.Fprintf(w, "if %s's weight went to 0 now, %s would take %s of its traffic:\n", r.GetFrom(), r.GetTo(), fmtPct(a.GetToFraction()))
	fmt.Fprintf(w, "  %-14s +%s\n", "moved prefill", fmtRate(a.GetMovedPrefillTokensPerSecond(), "tok/s"))
	fmt.Fprintf(w, "  %-14s +%s once (+%s over the window)\n", "recompute", fmtRate(a.GetRecomputeTokens(), "tok"),
		fmtRate(a.GetRecomputeTokensPerSecond(), "tok/s"))
	if c := a.GetToCapacityMsPerSecond(); a.GetThroughputKnown() && c > 0 {
		fmt.Fprintf(w, "  %-14s %s%% of its prefill capacity now, +%s%% with the extra tokens\n", r.GetTo()+" busy",
			trim(100*a.GetToPrefillMsPerSecond()/c, 1), trim(100*a.GetExtraPrefillMsPerSecond()/c, 1))
	}
	fmt.Fprintf(w, "verdict: %s\n", verdict(r))
	if a.GetThroughputKnown() && !a.GetCanAbsorb() {
		fmt.Fprintf(w, "  warm %s up (replay the hot prefixes, or ramp slower) or add instances\n", r.GetTo())
	}
	if len(r.GetHotPrefixes()) == 0 {
		fmt.Fprintf(w, "no hot prefix is cached deeper on %s than on %s\n", r.GetFrom(), r.GetTo())
		return
	}
	fmt.Fprintf(w, "hot prefixes cached only on %s (replay them to %s to warm it):\n", r.GetFrom(), r.GetTo())
	ht := newTable(textCol("FIRST BLOCK"), numCol("ON "+r.GetFrom()), numCol("ON "+r.GetTo()), numCol("REQUESTS"), numCol("EXTRA"))
	for _, h := range r.GetHotPrefixes() {
		ht.add(fmtHash(h.GetFirstBlockHash()), fmtBlocks(h.GetDepthFromBlocks()), fmtBlocks(h.GetDepthToBlocks()),
			fmt.Sprint(h.GetRequests()), fmtTokens(h.GetExtraTokens()))
	}
	ht.write(w)
}

// fmtRate formats a rate or amount with 2-3 significant digits and its
// unit: "0 tok/s", "950 tok/s", "1.2k tok/s", "3.4M tok".
func fmtRate(v float64, unit string) string {
	switch a := math.Abs(v); {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return fmt.Sprintf("%v %s", v, unit)
	case a < 10:
		return trim(v, 2) + " " + unit
	case a < 1000:
		return trim(v, 0) + " " + unit
	case a < 1e6:
		return trim(v/1e3, 1) + "k " + unit
	case a < 1e9:
		return trim(v/1e6, 1) + "M " + unit
	}
	return trim(v/1e9, 1) + "G " + unit
}
