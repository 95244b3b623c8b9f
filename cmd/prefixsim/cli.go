package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/prefixroute/prefixroute/internal/buildinfo"
	"github.com/prefixroute/prefixroute/internal/sim"
	"github.com/prefixroute/prefixroute/internal/simout"
)

const usage = `usage:
  prefixsim run [flags] SCENARIO...   simulate each scenario (a file, or a built-in name)
  prefixsim pd [flags] FILE           compare prefill deciders on a disaggregated scenario over seeds
  prefixsim trace [flags] SCENARIO    write the scenario's workload as a JSONL trace to stdout
  prefixsim list                      list the built-in scenarios
  prefixsim --version                 print the version
Run "prefixsim run -h" for the flags.`

// run is the whole command; it returns the exit code.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, usage)
		return 2
	}
	var err error
	switch args[0] {
	case "run":
		err = runCmd(args[1:], stdout, stderr)
	case "trace":
		err = traceCmd(args[1:], stdout, stderr)
	case "pd":
		err = pdCmd(args[1:], stdout, stderr)
	case "list":
		for _, n := range sim.ScenarioNames() {
			fmt.Fprintln(stdout, n)
		}
	case "-h", "--help", "help":
		fmt.Fprintln(stdout, usage)
	case "--version", "-version", "version":
		fmt.Fprintln(stdout, "prefixsim", buildinfo.Read())
	default:
		fmt.Fprintf(stderr, "prefixsim: unknown command %q\n%s\n", args[0], usage)
		return 2
	}
	if err == flag.ErrHelp {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "prefixsim: %v\n", err)
		return 1
	}
	return 0
}

// runFlags are the flags of "prefixsim run".
type runFlags struct {
	out, variants, routeDelays string
	seed                       uint64
	duration                   time.Duration
	parallel                   int
	quiet, noPlots, print      bool
}

func runCmd(args []string, stdout, stderr io.Writer) error {
	var f runFlags
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.out, "out", "out/sim", "output directory (one subdirectory per scenario)")
	fs.StringVar(&f.variants, "variants", "", "comma-separated variants to run (default all)")
	fs.Uint64Var(&f.seed, "seed", 0, "seed (default the scenario's)")
	fs.DurationVar(&f.duration, "duration", 0, "override the duration (simulated)")
	fs.IntVar(&f.parallel, "parallel", runtime.GOMAXPROCS(0), "variants simulated at once")
	fs.BoolVar(&f.quiet, "quiet", false, "no progress bar")
	fs.BoolVar(&f.noPlots, "no-plots", false, "skip the PNG plots")
	fs.BoolVar(&f.print, "print", true, "print each scenario's summary table to stdout")
	fs.StringVar(&f.routeDelays, "route-delays", "", "simulated runs: delay each request's queueing by the arrival-to-queued time a live run measured (prefixload scenario's DIR/<scenario>-live/<variant>-routes.csv), and draw as its router did (each pick seeded with the request id + 1)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return fmt.Errorf("run: name at least one scenario (built in: %s)", strings.Join(sim.ScenarioNames(), ", "))
	}
	for _, name := range fs.Args() {
		sc, err := sim.LoadScenario(name)
		if err != nil {
			return err
		}
		start := time.Now()
		runs, err := runSim(sc, &f, stderr)
		if err != nil {
			return err
		}
		files, err := simout.WriteReport(f.out, sc, runs, !f.noPlots)
		if err != nil {
			return err
		}
		if f.print {
			if err := printSummary(stdout, sc, runs, time.Since(start)); err != nil {
				return err
			}
		}
		if !f.quiet {
			fmt.Fprintf(stderr, "%s: wrote %d files under %s\n", sc.Name, len(files), f.out)
		}
	}
	return nil
}

func runSim(sc *sim.Scenario, f *runFlags, stderr io.Writer) ([]*sim.Result, error) {
	opts := sim.ScenarioOptions{Seed: f.seed, Duration: f.duration, Parallel: f.parallel}
	if f.routeDelays != "" {
		rf, err := os.Open(f.routeDelays)
		if err != nil {
			return nil, err
		}
		opts.LiveDraws = true
		opts.RouteDelays, err = simout.ReadRoutesCSV(rf)
		_ = rf.Close() // read-only, fully read
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f.routeDelays, err)
		}
	}
	if f.variants != "" {
		opts.Variants = strings.Split(f.variants, ",")
	}
	bar := simout.ProgressBar(f.quiet, stderr, sc.Name)
	if bar != nil {
		opts.Progress = func(done, total time.Duration) {
			bar.ChangeMax64(int64(total / time.Second))
			bar.Set64(int64(done / time.Second))
		}
		defer bar.Finish()
	}
	return sim.RunScenario(sc, opts)
}

func traceCmd(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("trace", flag.ContinueOnError)
	fs.SetOutput(stderr)
	seed := fs.Uint64("seed", 0, "seed (default the scenario's)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("trace: name one scenario")
	}
	sc, err := sim.LoadScenario(fs.Arg(0))
	if err != nil {
		return err
	}
	if *seed == 0 {
		*seed = sc.Seed
	}
	wl, err := sim.NewWorkload(sc, *seed)
	if err != nil {
		return err
	}
	n, err := sim.WriteTrace(stdout, wl)
	if err == nil {
		fmt.Fprintf(stderr, "wrote %d requests\n", n)
	}
	return err
}

// printSummary prints a scenario's table.
func printSummary(w io.Writer, sc *sim.Scenario, runs []*sim.Result, wall time.Duration) error {
	sums := make([]simout.Summary, len(runs))
	for i, r := range runs {
		sums[i] = simout.Summarise(r)
	}
	fmt.Fprintf(w, "\n## %s (%d variants, %v simulated each, %v wall)\n\n", sc.Name, len(runs), runs[0].Duration, wall.Round(time.Millisecond))
	if err := simout.WriteMarkdown(w, sc, sums); err != nil {
		return err
	}
	_, err := fmt.Fprintln(w)
	return err
}
