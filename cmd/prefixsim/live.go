package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"

	"github.com/prefixroute/prefixroute/internal/cluster"
	"github.com/prefixroute/prefixroute/internal/sim"
	"github.com/prefixroute/prefixroute/internal/state"
	"github.com/prefixroute/prefixroute/server"
)

// minLiveReportInterval keeps live reports under prefixrouted's default
// per-stream rate limit.
const minLiveReportInterval = 25 * time.Millisecond

// runLive runs the scenario's router variants one after the other against
// prefixrouted, each in a pool of its own: the one at --addr, or --replicas
// started in-process on 127.0.0.1 with temporary data dirs (joined through
// an in-process NATS server when more than one), a fresh set per variant.
// Baselines and formula-only variants (optimistic: false) are skipped.
func runLive(ctx context.Context, sc *sim.Scenario, f *runFlags, stderr io.Writer) ([]*sim.Result, error) {
	if f.addr != "" && f.replicas > 1 {
		return nil, fmt.Errorf("--replicas starts its own routers; it does not combine with --addr")
	}
	var runs []*sim.Result
	for _, v := range sc.Variants {
		if v.Baseline() || (v.Optimistic != nil && !*v.Optimistic) || (f.variants != "" && !contains(strings.Split(f.variants, ","), v.Name)) {
			continue
		}
		addrs := []string{f.addr}
		stop := func() {}
		if f.addr == "" {
			// The router's acks set the report interval: the scenario's, scaled
			// by --speed, but never under 25 ms (prefixrouted limits each
			// stream to 50 reports/s by default).
			interval := max(time.Duration(float64(sc.ReportInterval.D())/max(f.speed, 1e-9)), minLiveReportInterval)
			var err error
			addrs, stop, err = startRouters(max(f.replicas, 1), interval, state.Limits{})
			if err != nil {
				return nil, err
			}
		}
		opts := sim.LiveOptions{Addr: addrs[0], Replicas: addrs[1:], Pool: sc.Pool + "-" + v.Name, Duration: f.duration, Speed: f.speed, Seed: f.seed,
			MaxRequests: f.maxRequests, Workers: f.workers}
		bar := newBar(f.quiet, stderr, sc.Name+"/"+v.Name+" (live)")
		if bar != nil {
			opts.Progress = func(done, total time.Duration) {
				bar.ChangeMax64(int64(total / time.Second))
				bar.Set64(int64(done / time.Second))
			}
		}
		res, err := sim.RunLive(ctx, sc, v.Name, opts)
		stop()
		if bar != nil {
			bar.Finish()
		}
		if err != nil {
			return nil, fmt.Errorf("%s/%s live: %w", sc.Name, v.Name, err)
		}
		runs = append(runs, res)
	}
	if len(runs) == 0 {
		return nil, fmt.Errorf("%s: no router variant to run live (baselines cannot)", sc.Name)
	}
	return runs, nil
}

// startRouters starts n prefixrouted in-process on 127.0.0.1 with
// temporary data dirs; with n > 1 they are replicas joined through an
// in-process NATS server with JetStream. stop shuts everything down.
func startRouters(n int, interval time.Duration, limits state.Limits) (addrs []string, stop func(), err error) {
	var stops []func()
	stop = func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	defer func() {
		if err != nil {
			stop()
		}
	}()
	dir, err := os.MkdirTemp("", "prefixsim-live-")
	if err != nil {
		return nil, nil, err
	}
	stops = append(stops, func() {
		if err := os.RemoveAll(dir); err != nil {
			fmt.Fprintf(os.Stderr, "prefixsim: removing %s: %v\n", dir, err)
		}
	})
	var natsURL string
	if n > 1 {
		ns, err := natsserver.NewServer(&natsserver.Options{Host: "127.0.0.1", Port: -1, JetStream: true,
			StoreDir: filepath.Join(dir, "nats"), NoLog: true, NoSigs: true})
		if err != nil {
			return nil, nil, fmt.Errorf("nats-server: %w", err)
		}
		go ns.Start()
		if !ns.ReadyForConnections(10 * time.Second) {
			ns.Shutdown()
			return nil, nil, fmt.Errorf("nats-server: not ready after 10 s")
		}
		stops = append(stops, ns.Shutdown)
		natsURL = ns.ClientURL()
	}
	for i := range n {
		opts := server.Options{DataDir: filepath.Join(dir, fmt.Sprintf("r%d", i+1)),
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), ReportInterval: interval,
			Limits: limits}
		if natsURL != "" {
			opts.Cluster = &cluster.Config{URLs: []string{natsURL}, Name: fmt.Sprintf("prefixsim-r%d", i+1)}
		}
		d, err := server.Start(server.DaemonConfig{Listen: "127.0.0.1:0", HTTPListen: "off", Server: opts})
		if err != nil {
			return nil, nil, err
		}
		stops = append(stops, func() {
			sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := d.Shutdown(sctx); err != nil {
				fmt.Fprintf(os.Stderr, "prefixsim: stopping router %s: %v\n", d.Addr(), err)
			}
		})
		addrs = append(addrs, d.Addr())
	}
	return addrs, stop, nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// printSummary prints a scenario's table, and the gRPC figures of live runs.
func printSummary(w io.Writer, sc *sim.Scenario, runs []*sim.Result, wall time.Duration) error {
	sums := make([]sim.Summary, len(runs))
	for i, r := range runs {
		sums[i] = r.Summarise()
	}
	fmt.Fprintf(w, "\n## %s (%d variants, %v simulated each, %v wall)\n\n", sc.Name, len(runs), runs[0].Duration, wall.Round(time.Millisecond))
	if err := sim.WriteMarkdown(w, sc, sums); err != nil {
		return err
	}
	if runs[0].Live != nil {
		fmt.Fprintf(w, "\n| variant | picks | pick errors | pick p50 ms | pick p99 ms | pick max ms | arrival to queued p50 / p99 ms (virtual) | reports acked | report streams | unfinished |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
		for _, r := range runs {
			l := r.Live
			fmt.Fprintf(w, "| %s | %d | %d | %.2f | %.2f | %.2f | %.2f / %.2f | %d | %d | %d |\n", r.Variant.Name, l.Picks, l.PickErrors,
				l.PickP50Ms, l.PickP99Ms, l.PickMax, l.RouteP50Ms, l.RouteP99Ms, l.Acks, l.ReportStreams, l.Unfinished)
			if l.FirstError != "" {
				fmt.Fprintf(w, "\nfirst pick error of %s: %s\n", r.Variant.Name, l.FirstError)
			}
		}
	}
	_, err := fmt.Fprintln(w)
	return err
}
