package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"

	"github.com/spf13/pflag"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
)

// weightsGet is 'prefixctl weights get POOL'.
func (c *cli) weightsGet(fs *pflag.FlagSet) runner {
	return func(pos []string) error {
		return adminCall(c, func(ctx context.Context, a pb.AdminServiceClient) (*pb.GetWeightsResponse, error) {
			return a.GetWeights(ctx, &pb.GetWeightsRequest{Pool: pos[0]})
		}, func(w io.Writer, r *pb.GetWeightsResponse) { renderWeights(w, pos[0], r) })
	}
}

// weightsSet is 'prefixctl weights set POOL DEP=W... [--expect-version N] [--force] [--create]'.
func (c *cli) weightsSet(fs *pflag.FlagSet) runner {
	expect := fs.Uint64("expect-version", 0, "compare-and-set: fail unless the weights version is `N` (0 = unconditional)")
	force := fs.Bool("force", false, "allow_drain: set weights that leave no deployment with an eligible instance above 0, or name one the pool never saw (audited)")
	create := createFlag(fs)
	return func(pos []string) error {
		weights, err := parseWeights(pos[1:])
		if err != nil {
			return usagef("%v", err)
		}
		pool := pos[0]
		admin, err := c.admin()
		if err != nil {
			return err
		}
		ctx, cancel := c.call()
		defer cancel()
		resp, err := admin.SetWeights(ctx, &pb.SetWeightsRequest{Pool: pool, Weights: weights, ExpectedVersion: *expect, AllowDrain: *force,
			AllowNewPool: *create})
		if status.Code(err) == codes.Aborted {
			current := "unknown"
			if got, gerr := admin.GetWeights(ctx, &pb.GetWeightsRequest{Pool: pool}); gerr == nil {
				current = fmt.Sprint(got.GetVersion())
			}
			return &exitError{code: exitConflict, msg: fmt.Sprintf(
				"version conflict: expected %d, current %s (re-read with 'prefixctl weights get %s')",
				*expect, current, shellWord(pool))}
		}
		if err != nil {
			return err
		}
		if c.output == "json" {
			return writeJSON(c.stdout, resp)
		}
		renderWeightsSet(c.stdout, pool, resp)
		return nil
	}
}

// source says where a deployment's weight comes from.
func source(d *pb.DeploymentWeight, set bool) string {
	switch {
	case !set:
		return "equal split (never set)"
	case d.GetConfigured():
		return "configured"
	}
	return "left out: 0"
}

// renderWeights prints GetWeights as a table.
func renderWeights(w io.Writer, pool string, r *pb.GetWeightsResponse) {
	if r.GetWeightsSet() {
		fmt.Fprintf(w, "pool %s: weights version %d\n", pool, r.GetVersion())
	} else {
		fmt.Fprintf(w, "pool %s: weights never set, every deployment weighs 1 (version 0)\n", pool)
	}
	if rp := r.GetRamp(); rp != nil && (rp.GetState() == pb.RampState_RAMP_STATE_RUNNING || rp.GetState() == pb.RampState_RAMP_STATE_PAUSED) {
		fmt.Fprintf(w, "%s (prefixctl ramp status %s)\n", rampLine(rp), shellWord(pool))
	}
	if len(r.GetDeployments()) == 0 {
		fmt.Fprintln(w, "no deployments yet: none configured, none reporting")
		return
	}
	t := newTable(nameCol("DEPLOYMENT", 12), numCol("WEIGHT"), numCol("SHARE"), numCol("INSTANCES"), textCol("SOURCE"))
	for _, d := range r.GetDeployments() {
		t.add(d.GetDeployment(), fmtWeight(d.GetWeight()), fmtPct(d.GetShare()), fmt.Sprint(d.GetInstances()),
			source(d, r.GetWeightsSet()))
	}
	t.write(w)
}

// renderWeightsSet prints SetWeights' answer: the new version and shares.
func renderWeightsSet(w io.Writer, pool string, r *pb.SetWeightsResponse) {
	fmt.Fprintf(w, "pool %s: weights set, version %d\n", pool, r.GetVersion())
	sum := 0.0
	for _, v := range r.GetWeights() {
		sum += v
	}
	t := newTable(nameCol("DEPLOYMENT", 12), numCol("WEIGHT"), numCol("SHARE"))
	for _, dep := range slices.Sorted(maps.Keys(r.GetWeights())) {
		v := r.GetWeights()[dep]
		share := 0.0
		if sum > 0 {
			share = v / sum
		}
		t.add(dep, fmtWeight(v), fmtPct(share))
	}
	t.write(w)
	if sum == 0 {
		fmt.Fprintln(w, "every weight is 0: the pool is drained, picks fail until a weight is raised")
	}
}

// createFlag is --create, allow_new_pool: the write may create a pool the
// router does not know (else refused, so that a misspelt pool is not
// created).
func createFlag(fs *pflag.FlagSet) *bool {
	return fs.Bool("create", false, "allow_new_pool: create the pool if the router does not know it (no configuration, no instances, none seen reporting within 24 h)")
}
