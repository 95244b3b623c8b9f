package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"google.golang.org/protobuf/types/known/durationpb"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
)

// rampStart is 'prefixctl ramp start POOL DEP=W... --over D --every D' or
// 'prefixctl ramp start POOL --steps SPEC'.
func (c *cli) rampStart(fs *pflag.FlagSet) runner {
	over := fs.Duration("over", 0, "reach the target weights after `D`")
	every := fs.Duration("every", 0, "one step every `D` (>= 1s)")
	stepSpec := fs.String("steps", "", "explicit steps `SPEC` instead: AFTER:DEP=W,...;AFTER:...")
	expect := fs.Uint64("expect-version", 0, "fail unless the weights version is `N`")
	hold := fs.Float64("auto-hold", 0, "pause before a step that would leave the target less than `PCT` % prefill headroom")
	from := fs.String("from", "", "auto-hold: the deployment `A` losing traffic (default: the one losing most share)")
	to := fs.String("to", "", "auto-hold: the deployment `B` gaining traffic (default: the one gaining most share)")
	force := fs.Bool("force", false, "allow_drain: start a ramp that ends with all traffic on deployments without an eligible instance, or names one the pool never saw (audited)")
	create := createFlag(fs)
	return func(pos []string) error {
		var err error
		req := &pb.StartRampRequest{Pool: pos[0], ExpectedVersion: *expect, AllowDrain: *force, AllowNewPool: *create}
		if *hold != 0 {
			req.AutoHold = &pb.AutoHold{MinHeadroomPct: *hold, From: *from, To: *to}
		}
		switch {
		case *stepSpec != "":
			if len(pos) > 1 || *over != 0 || *every != 0 {
				return usagef("--steps replaces DEPLOYMENT=WEIGHT, --over and --every; give one form")
			}
			if req.Steps, err = parseSteps(*stepSpec); err != nil {
				return usagef("--steps: %v", err)
			}
		default:
			if *over == 0 || *every == 0 {
				return usagef("a linear ramp needs --over D and --every D (or give --steps)")
			}
			if req.Target, err = parseWeights(pos[1:]); err != nil {
				return usagef("%v", err)
			}
			req.Duration, req.StepInterval = durationpb.New(*over), durationpb.New(*every)
		}
		return adminCall(c, func(ctx context.Context, a pb.AdminServiceClient) (*pb.StartRampResponse, error) {
			return a.StartRamp(ctx, req)
		}, func(w io.Writer, r *pb.StartRampResponse) { renderRamp(w, pos[0], r.GetRamp()) })
	}
}

// parseSteps parses "AFTER:DEP=W,DEP=W;AFTER:...".
func parseSteps(spec string) ([]*pb.RampStep, error) {
	var steps []*pb.RampStep
	for i, part := range strings.Split(spec, ";") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		after, ws, ok := strings.Cut(part, ":")
		if !ok {
			return nil, fmt.Errorf("step %d %q: want AFTER:DEP=W[,DEP=W]", i+1, part)
		}
		d, err := time.ParseDuration(strings.TrimSpace(after))
		if err != nil {
			return nil, fmt.Errorf("step %d: after %q is not a duration (0s, 90s, 10m)", i+1, after)
		}
		w, err := parseWeights(splitList(ws))
		if err != nil {
			return nil, fmt.Errorf("step %d: %v", i+1, err)
		}
		steps = append(steps, &pb.RampStep{Weights: w, After: durationpb.New(d)})
	}
	if len(steps) == 0 {
		return nil, fmt.Errorf("no steps")
	}
	return steps, nil
}

// rampStatus is 'prefixctl ramp status POOL'.
func (c *cli) rampStatus(fs *pflag.FlagSet) runner {
	return func(pos []string) error {
		return adminCall(c, func(ctx context.Context, a pb.AdminServiceClient) (*pb.GetRampResponse, error) {
			return a.GetRamp(ctx, &pb.GetRampRequest{Pool: pos[0]})
		}, func(w io.Writer, r *pb.GetRampResponse) { renderRamp(w, pos[0], r.GetRamp()) })
	}
}

// rampChange is 'prefixctl ramp pause|resume|abort POOL [--id N]'.
func (c *cli) rampChange(fs *pflag.FlagSet) runner {
	id := fs.Uint64("id", 0, "act only if the current ramp is ramp `N`")
	return func(pos []string) error {
		pool := pos[0]
		render := func(w io.Writer, r *pb.Ramp) { renderRamp(w, pool, r) }
		switch c.cmd {
		case "ramp pause":
			return adminCall(c, func(ctx context.Context, a pb.AdminServiceClient) (*pb.PauseRampResponse, error) {
				return a.PauseRamp(ctx, &pb.PauseRampRequest{Pool: pool, RampId: *id})
			}, func(w io.Writer, r *pb.PauseRampResponse) { render(w, r.GetRamp()) })
		case "ramp resume":
			return adminCall(c, func(ctx context.Context, a pb.AdminServiceClient) (*pb.ResumeRampResponse, error) {
				return a.ResumeRamp(ctx, &pb.ResumeRampRequest{Pool: pool, RampId: *id})
			}, func(w io.Writer, r *pb.ResumeRampResponse) { render(w, r.GetRamp()) })
		}
		return adminCall(c, func(ctx context.Context, a pb.AdminServiceClient) (*pb.AbortRampResponse, error) {
			return a.AbortRamp(ctx, &pb.AbortRampRequest{Pool: pool, RampId: *id})
		}, func(w io.Writer, r *pb.AbortRampResponse) { render(w, r.GetRamp()) })
	}
}

// rampStateName is the state's word in tables.
func rampStateName(s pb.RampState) string {
	return strings.ToLower(strings.TrimPrefix(s.String(), "RAMP_STATE_"))
}

// rampLine is the one-line summary of a ramp: "ramp 2 running: step 1 of
// 4 applied, next in 1m0s, done in 4m0s".
func rampLine(r *pb.Ramp) string {
	s := fmt.Sprintf("ramp %d %s: step %d of %d applied", r.GetId(), rampStateName(r.GetState()), r.GetStepsApplied(), len(r.GetSteps()))
	switch r.GetState() {
	case pb.RampState_RAMP_STATE_RUNNING:
		s += fmt.Sprintf(", next in %v, done in %v", roundWait(r.GetUntilNext().AsDuration()), roundWait(r.GetUntilDone().AsDuration()))
	case pb.RampState_RAMP_STATE_PAUSED:
		s += fmt.Sprintf(", next %v after resume", roundWait(r.GetUntilNext().AsDuration()))
	}
	return s
}

// roundWait rounds a wait for display: whole seconds from 1 s up.
func roundWait(d time.Duration) time.Duration {
	if d >= time.Second {
		return d.Round(time.Second)
	}
	return d.Round(time.Millisecond)
}

// maxRampRows bounds the steps a table shows: the last applied ones, the
// next ones, and the last step.
const maxRampRows = 12

// renderRamp prints a ramp: the summary, who started it, and its steps as
// each deployment's share of the total weight.
func renderRamp(w io.Writer, pool string, r *pb.Ramp) {
	fmt.Fprintf(w, "pool %s: %s\n", pool, rampLine(r))
	fmt.Fprintf(w, "started %s by %s\n", r.GetStartedAt().AsTime().UTC().Format(time.RFC3339), r.GetStartedBy())
	if r.GetReason() != "" && r.GetState() != pb.RampState_RAMP_STATE_RUNNING {
		fmt.Fprintf(w, "%s: %s\n", rampStateName(r.GetState()), r.GetReason())
	}
	if h := r.GetAutoHold(); h != nil {
		fmt.Fprintf(w, "auto-hold: pause before a step leaving %s < %s%% prefill headroom (from %s)\n",
			h.GetTo(), trim(h.GetMinHeadroomPct(), 1), h.GetFrom())
	}
	deps := map[string]bool{}
	for d := range r.GetStart() {
		deps[d] = true
	}
	for _, st := range r.GetSteps() {
		for d := range st.GetWeights() {
			deps[d] = true
		}
	}
	names := slices.Sorted(maps.Keys(deps))
	cols := []column{numCol("STEP"), numCol("AFTER")}
	for _, d := range names {
		cols = append(cols, column{name: d, right: true, shrink: true, min: 6})
	}
	cols = append(cols, textCol(""))
	t := newTable(cols...)
	row := func(label, after string, weights map[string]float64, note string) {
		cells := []string{label, after}
		for _, d := range names {
			cells = append(cells, fmtPct(share(weights, d)))
		}
		t.add(append(cells, note)...)
	}
	row("start", "", r.GetStart(), "")
	applied := int(r.GetStepsApplied())
	n := len(r.GetSteps())
	lo, hi := max(0, applied-3), min(n, max(0, applied-3)+maxRampRows-1)
	if lo > 0 {
		t.section(hidden(lo))
	}
	for i, st := range r.GetSteps() {
		if (i < lo || i >= hi) && i != n-1 {
			continue
		}
		if i == n-1 && hi < n-1 {
			t.section(hidden(n - 1 - hi))
		}
		note := ""
		switch {
		case i < applied:
			note = "applied"
		case i == applied && r.GetState() == pb.RampState_RAMP_STATE_RUNNING:
			note = "next"
		}
		row(fmt.Sprint(i+1), st.GetAfter().AsDuration().String(), st.GetWeights(), note)
	}
	t.write(w)
}

// hidden is the section line standing for n steps left out.
func hidden(n int) string {
	if n == 1 {
		return "  … 1 step …"
	}
	return fmt.Sprintf("  … %d steps …", n)
}

// share is d's share of the total weight, 0 when the total is 0.
func share(w map[string]float64, d string) float64 {
	var sum float64
	for _, v := range w {
		sum += v
	}
	if sum == 0 {
		return 0
	}
	return w[d] / sum
}
