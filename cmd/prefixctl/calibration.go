package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/pflag"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
)

// calibration is 'prefixctl calibration POOL': the prefill model each
// deployment learned from outcomes.
func (c *cli) calibration(*pflag.FlagSet) runner {
	return func(pos []string) error {
		return adminCall(c, func(ctx context.Context, a pb.AdminServiceClient) (*pb.GetSloCalibrationResponse, error) {
			return a.GetSloCalibration(ctx, &pb.GetSloCalibrationRequest{Pool: pos[0]})
		}, renderCalibration)
	}
}

// renderCalibration prints GetSloCalibration: the prior, then a row per
// deployment. USED says whether picks price with the fit; SAMPLES, SKIP
// and CLIP count outcomes fitted, skipped (queue not seen) and clipped
// (over 5 % late or 10 % early against the fit); SCALE multiplies the prior's prefill time (2x = prefill takes
// twice what the prior says); C TOK is the fitted doubling context in
// tokens; QUEUE the fitted correction of queue_ms (reported only); ERR the
// running mean |observed − fit| / predicted.
func renderCalibration(w io.Writer, r *pb.GetSloCalibrationResponse) {
	mode := fmt.Sprintf("apply (from %d samples)", r.GetMinSamples())
	if r.GetCalibration() == pb.SloCalibration_SLO_CALIBRATION_OBSERVE {
		mode = "observe (the prior prices)"
	}
	fmt.Fprintf(w, "pool %s: prior doubling context %s tok; calibration %s\n", r.GetPool(),
		trim(r.GetPriorDoublingContextTokens(), 0), mode)
	if len(r.GetDeployments()) == 0 {
		fmt.Fprintln(w, "no fits yet: no served outcome with ttft_ms has matched a pick")
		return
	}
	t := newTable(nameCol("DEPLOYMENT", 10), numCol("VERSION"), textCol("USED"), numCol("SAMPLES"), numCol("SKIP"),
		numCol("CLIP"), numCol("SCALE"), numCol("C TOK"), numCol("QUEUE"), numCol("ERR"))
	for _, d := range r.GetDeployments() {
		use := "no"
		if d.GetInUse() {
			use = "yes"
		}
		t.add(d.GetDeployment(), fmt.Sprint(d.GetVersion()), use, fmt.Sprint(d.GetAccepted()), fmt.Sprint(d.GetIgnored()),
			fmt.Sprint(d.GetClipped()), trim(d.GetPrefillScale(), 2)+"x", trim(d.GetDoublingContextTokens(), 0),
			trim(d.GetQueueScale(), 2)+"x", trim(100*d.GetMeanAbsRelResidual(), 1)+"%")
	}
	t.write(w)
}
