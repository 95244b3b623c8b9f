// Command prefixload is the load test of prefixrouted (make loadtest): it
// starts the daemon as a separate process on loopback, opens many
// ReportLoad streams reporting at a fixed rate, runs Picks as fast as the
// machine allows, and prints errors, Pick latency, reports ingested and the
// daemon's peak RSS (VmHWM) as a Markdown table. It only ever connects to
// loopback and stops by itself after --duration.
//
// prefixload scenario plays a simulator scenario against real routers
// instead (internal/simlive): the same files prefixsim run writes, from a
// live run, for the live-vs-simulated comparison (make sim-smoke).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prefixroute/prefixroute/internal/buildinfo"
)

// config is what one load test runs.
type config struct {
	daemon      string        // prefixrouted binary
	streams     int           // ReportLoad streams, one per instance
	conns       int           // connections the streams share (0: one each)
	rate        float64       // reports per second per stream
	pickers     int           // concurrent Pick loops
	pools       int           // pools the instances spread over
	duration    time.Duration // measured time
	auth        bool          // run with a tokens file and bearer tokens
	events      int           // stored block hashes per report
	warmUp      time.Duration // before the measured window
	deps        int           // deployments per pool
	capacity    uint64        // kv_capacity_blocks every instance reports
	pickRate    float64       // Picks per second offered (open loop); 0: closed loop
	ackInterval time.Duration // ack_interval_ms of every stream; 0: every report acked
	cpuPerCall  int           // --cpu-per-call: calls of each kind; 0: the load test
	batch       int           // instances per ReportLoadBatch stream; 1: a ReportLoad stream each
	clock       clock         // paces the senders and the window; nil: wallClock
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "scenario" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		code := scenarioCmd(ctx, os.Args[2:], os.Stdout, os.Stderr)
		stop()
		os.Exit(code)
	}
	var c config
	flag.StringVar(&c.daemon, "daemon", "bin/prefixrouted", "prefixrouted binary to start")
	flag.IntVar(&c.streams, "streams", 2000, "concurrent ReportLoad streams (one instance each)")
	flag.IntVar(&c.conns, "conns", 50, "gRPC connections the streams share (40 streams each by default); 0 gives each stream its own, as separate instance processes have")
	flag.Float64Var(&c.rate, "rate", 20, "reports per second per stream")
	flag.IntVar(&c.pickers, "pickers", 8, "concurrent closed-loop Pick callers")
	flag.IntVar(&c.pools, "pools", 20, "pools the instances spread over (two deployments each)")
	flag.DurationVar(&c.duration, "duration", 60*time.Second, "measured duration (at most 10m)")
	flag.BoolVar(&c.auth, "auth", true, "run the daemon with a tokens file; every call sends a bearer token")
	flag.IntVar(&c.events, "events", 4, "stored block hashes per report (cache events)")
	flag.DurationVar(&c.warmUp, "warm-up", 5*time.Second, "unmeasured time between the last stream opening and the window")
	flag.IntVar(&c.deps, "deployments", 2, "deployments per pool")
	flag.Uint64Var(&c.capacity, "capacity", 4096, "kv_capacity_blocks every instance reports (bounds its blocks in the prefix index)")
	flag.Float64Var(&c.pickRate, "pick-rate", 0, "Picks per second offered, spread over the --pickers callers (open loop); 0: each caller sends its next Pick when the last is answered")
	flag.DurationVar(&c.ackInterval, "ack-interval", time.Second, "ack_interval_ms every stream asks for (pkg/client's default); 0: an ack for every report")
	flag.IntVar(&c.cpuPerCall, "cpu-per-call", 0, "instead of the load test: the daemon's CPU per call for this many empty calls and Picks at each audit level, in alternating blocks (make loadtest-cpu)")
	flag.IntVar(&c.batch, "batch", 1, "instances per ReportLoadBatch stream, one message per tick carrying a report of each (a node agent's); 1: a ReportLoad stream per instance")
	version := flag.Bool("version", false, "print the version and exit")
	flag.Parse()
	if *version {
		fmt.Println("prefixload", buildinfo.Read())
		return
	}
	if c.duration <= 0 || c.duration > 10*time.Minute || c.streams <= 0 || c.rate <= 0 || c.pools <= 0 || c.pickers < 0 ||
		c.batch < 1 || c.batch > 256 || c.deps <= 0 || c.capacity == 0 || !(c.pickRate >= 0 && c.pickRate <= 1e6) {
		fmt.Fprintln(os.Stderr, "prefixload: want 0 < --duration <= 10m, positive --streams, --rate, --pools, --deployments, --capacity, 1 <= --batch <= 256, and 0 <= --pick-rate <= 1e6 /s")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := run(ctx, c)
	if err != nil {
		fmt.Fprintf(os.Stderr, "prefixload: %v\n", err)
		os.Exit(1)
	}
	res.print(os.Stdout, c)
	if res.errors() > 0 {
		os.Exit(1)
	}
}

// outcome is what a run prints: a load test's result or --cpu-per-call's.
type outcome interface {
	print(io.Writer, config)
	errors() int64
}

// run starts the daemon, loads it, stops it and returns the measurements.
func run(ctx context.Context, c config) (outcome, error) {
	d, err := startDaemon(c)
	if err != nil {
		return nil, err
	}
	defer d.stop()
	fmt.Fprintf(os.Stderr, "prefixload: prefixrouted pid %d on %s; opening %d streams\n", d.cmd.Process.Pid, d.addr, c.streams)
	l, err := newLoad(ctx, c, d)
	if err != nil {
		return nil, err
	}
	defer l.close()
	if err := l.connect(ctx); err != nil {
		return nil, err
	}
	if c.cpuPerCall > 0 {
		fmt.Fprintf(os.Stderr, "prefixload: %d streams reporting; %d calls of each kind\n", c.streams, c.cpuPerCall)
		return l.perCall(ctx, c.cpuPerCall)
	}
	fmt.Fprintf(os.Stderr, "prefixload: %d streams reporting; measuring for %v\n", c.streams, c.duration)
	res := l.measure(ctx, c.duration)
	res.hwmKB, res.rssKB = d.memory()
	res.daemonCPU = d.cpu()
	return res, nil
}
