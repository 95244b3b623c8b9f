package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/prefixroute/prefixroute/internal/sim"
	"github.com/prefixroute/prefixroute/internal/simlive"
	"github.com/prefixroute/prefixroute/internal/simout"
)

const scenarioUsage = `usage: prefixload scenario [flags] SCENARIO...

Plays each simulator scenario (a file, or a built-in name: prefixsim list)
against real prefixrouted over gRPC in wall-clock time: its emulated
instances report load, gateway workers call Pick, its weight schedule goes
through SetWeights. Each router variant runs in a pool of its own against a
fresh set of --replicas routers started here (or the one at --addr); a
simulator baseline (llm-d-style and the others) runs on the same traffic
with its picker in this process, fed the same reports, without the gRPC
round trip; formula-only variants are skipped. It writes DIR/<scenario>-live/ with the
files prefixsim run writes (per-variant CSV series, summary.md,
summary.json, tail.csv, the plots) plus <variant>-routes.csv, the
arrival-to-queued times prefixsim run --route-delays replays. --compare
also simulates the same variants and tables live against simulated.

Flags:`

// scenarioFlags are the flags of "prefixload scenario".
type scenarioFlags struct {
	out, variants, addr, daemon, natsServer, natsURL string
	seed                                             uint64
	duration                                         time.Duration
	maxRequests, workers, replicas                   int
	speed                                            float64
	quiet, noPlots, print, compare                   bool
}

// scenarioCmd is "prefixload scenario"; it returns the exit code.
func scenarioCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var f scenarioFlags
	fs := flag.NewFlagSet("scenario", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, scenarioUsage)
		fs.PrintDefaults()
	}
	fs.StringVar(&f.out, "out", "out/sim", "output directory (DIR/<scenario>-live/ per scenario)")
	fs.StringVar(&f.variants, "variants", "", "comma-separated variants to run (default every router variant)")
	fs.Uint64Var(&f.seed, "seed", 0, "seed (default the scenario's)")
	fs.DurationVar(&f.duration, "duration", 10*time.Second, "wall-clock time requests arrive, per variant (at most the scenario's duration / --speed)")
	fs.Float64Var(&f.speed, "speed", 1, "virtual seconds per wall-clock second")
	fs.IntVar(&f.maxRequests, "max-requests", 20000, "bound on the requests sent per variant")
	fs.IntVar(&f.workers, "workers", 8, "concurrent gateway workers calling Pick")
	fs.IntVar(&f.replicas, "replicas", 1, "router replicas to start per variant, joined through NATS when more than 1; workers and instances are spread over them")
	fs.StringVar(&f.addr, "addr", "", "a running prefixrouted's gRPC address (loopback only) instead of starting routers")
	fs.StringVar(&f.daemon, "daemon", "bin/prefixrouted", "prefixrouted binary to start")
	fs.StringVar(&f.natsServer, "nats-server", "bin/nats-server", "nats-server binary started for --replicas above 1 (make tools installs it)")
	fs.StringVar(&f.natsURL, "nats", "", "a running NATS server (JetStream on) for --replicas above 1 instead of starting one")
	fs.BoolVar(&f.quiet, "quiet", false, "no progress bar")
	fs.BoolVar(&f.noPlots, "no-plots", false, "skip the PNG plots")
	fs.BoolVar(&f.print, "print", true, "print each scenario's summary table to stdout")
	fs.BoolVar(&f.compare, "compare", false, "also simulate the variants played (same seed and virtual duration; plain, and with the live delays and draws replayed) and write live against simulated to DIR/<scenario>-live/compare.md (and stdout with --print)")
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	if err := f.check(fs.NArg()); err != nil {
		fmt.Fprintf(stderr, "prefixload scenario: %v\n", err)
		return 2
	}
	for _, name := range fs.Args() {
		if err := playScenario(ctx, name, &f, stdout, stderr); err != nil {
			fmt.Fprintf(stderr, "prefixload scenario: %v\n", err)
			return 1
		}
	}
	return 0
}

// check validates the flags before anything starts.
func (f *scenarioFlags) check(scenarios int) error {
	switch {
	case scenarios == 0:
		return fmt.Errorf("name at least one scenario (built in: %s)", strings.Join(sim.ScenarioNames(), ", "))
	case f.addr != "" && f.replicas > 1:
		return fmt.Errorf("--replicas starts its own routers; it does not combine with --addr")
	case f.replicas < 1 || f.workers < 1 || f.maxRequests < 1 || !(f.speed > 0) || f.duration <= 0:
		return fmt.Errorf("want positive --replicas, --workers, --max-requests, --speed and --duration")
	case f.addr != "":
		return simlive.CheckLoopback(f.addr)
	}
	return nil
}

// playScenario runs one scenario's router variants one after the other,
// writes its files and prints its summary.
func playScenario(ctx context.Context, name string, f *scenarioFlags, stdout, stderr io.Writer) error {
	sc, err := sim.LoadScenario(name)
	if err != nil {
		return err
	}
	start := time.Now()
	var runs []*sim.Result
	for _, v := range sc.Variants {
		if (v.Optimistic != nil && !*v.Optimistic) || (f.variants != "" && !slices.Contains(strings.Split(f.variants, ","), v.Name)) {
			continue
		}
		res, err := playVariant(ctx, sc, v, f, stderr)
		if err != nil {
			return fmt.Errorf("%s/%s live: %w", sc.Name, v.Name, err)
		}
		runs = append(runs, res)
	}
	if len(runs) == 0 {
		return fmt.Errorf("%s: no variant to run live (formula-only variants cannot; --variants %q)", sc.Name, f.variants)
	}
	report := *sc
	report.Name = sc.Name + "-live"
	files, err := simout.WriteReport(f.out, &report, runs, !f.noPlots)
	if err != nil {
		return err
	}
	if f.print {
		if err := printLive(stdout, &report, runs, time.Since(start)); err != nil {
			return err
		}
	}
	if f.compare {
		table, err := compareRuns(sc, runs, f.seed)
		if err != nil {
			return fmt.Errorf("%s: compare: %w", sc.Name, err)
		}
		path := filepath.Join(f.out, report.Name, "compare.md")
		if err := os.WriteFile(path, []byte(table), 0o644); err != nil {
			return err
		}
		files = append(files, path)
		if f.print {
			fmt.Fprintln(stdout, table)
		}
	}
	if !f.quiet {
		fmt.Fprintf(stderr, "%s: wrote %d files under %s\n", report.Name, len(files), f.out)
	}
	return nil
}

// playVariant runs variant v against the router at --addr or a fresh set
// started for it, in a pool of its own.
func playVariant(ctx context.Context, sc *sim.Scenario, v sim.Variant, f *scenarioFlags, stderr io.Writer) (*sim.Result, error) {
	addrs := []string{f.addr}
	if f.addr == "" && !v.Baseline() { // a baseline picks in this process
		interval := sc.ReportInterval.D()
		if v.ReportInterval > 0 {
			interval = v.ReportInterval.D()
		}
		r, err := startRouters(routerOptions{daemon: f.daemon, natsServer: f.natsServer, natsURL: f.natsURL, n: f.replicas,
			interval: simlive.ReportInterval(interval, f.speed)})
		if err != nil {
			return nil, err
		}
		defer r.stop()
		addrs = r.addrs()
	}
	opts := simlive.Options{Addr: addrs[0], Replicas: addrs[1:], Pool: sc.Pool + "-" + v.Name, Duration: f.duration,
		Speed: f.speed, Seed: f.seed, MaxRequests: f.maxRequests, Workers: f.workers}
	if bar := simout.ProgressBar(f.quiet, stderr, sc.Name+"/"+v.Name+" (live)"); bar != nil {
		opts.Progress = func(done, total time.Duration) {
			bar.ChangeMax64(int64(total / time.Second))
			bar.Set64(int64(done / time.Second))
		}
		defer bar.Finish()
	}
	return simlive.RunLive(ctx, sc, v.Name, opts)
}

// printLive prints a scenario's table and the gRPC figures of its runs.
func printLive(w io.Writer, sc *sim.Scenario, runs []*sim.Result, wall time.Duration) error {
	sums := make([]simout.Summary, len(runs))
	for i, r := range runs {
		sums[i] = simout.Summarise(r)
	}
	fmt.Fprintf(w, "\n## %s (%d variants, %v simulated each, %v wall)\n\n", sc.Name, len(runs), runs[0].Duration, wall.Round(time.Millisecond))
	if err := simout.WriteMarkdown(w, sc, sums); err != nil {
		return err
	}
	fmt.Fprintf(w, "\n| variant | picks | pick errors | shed (slo_unattainable) | pick p50 ms | pick p99 ms | pick max ms | arrival to queued p50 / p99 ms (virtual) | reports acked | report streams | unfinished |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range runs {
		l := r.Live
		fmt.Fprintf(w, "| %s | %d | %d | %d (%d) | %.2f | %.2f | %.2f | %.2f / %.2f | %d | %d | %d |\n", r.Variant.Name, l.Picks, l.PickErrors,
			l.Shed, l.ShedSLO, l.PickP50Ms, l.PickP99Ms, l.PickMax, l.RouteP50Ms, l.RouteP99Ms, l.Acks, l.ReportStreams, l.Unfinished)
	}
	for _, r := range runs {
		if l := r.Live; l.FirstError != "" {
			fmt.Fprintf(w, "\nfirst pick error of %s: %s\n", r.Variant.Name, l.FirstError)
		}
		if o := r.Live.Outcomes; o != nil {
			fmt.Fprintf(w, "\noutcomes of %s: %d sent, %d dropped, %d failed (ReportOutcome); the router's fits:\n", r.Variant.Name, o.Sent, o.Dropped, o.Failed)
			for _, f := range o.Fits {
				fmt.Fprintf(w, "- %s: version %d, %d accepted, %d ignored, %d clipped, prefill scale %.3f, doubling context %.0f tokens, in use %v\n",
					f.Deployment, f.Version, f.Accepted, f.Ignored, f.Clipped, f.PrefillScale, f.DoublingContextTokens, f.InUse)
			}
		}
	}
	_, err := fmt.Fprintln(w)
	return err
}
