// Command prefixrouted is the prefixroute sidecar: gateways ask it which
// model-server instance should serve each request. See README.md and
// docs/operating.md.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prefixroute/prefixroute/server"
)

func main() { os.Exit(run()) }

// run parses the flags, serves until SIGTERM or SIGINT, shuts down and
// returns the exit code: 0 after a clean shutdown.
func run() int {
	var cfg server.DaemonConfig
	flag.StringVar(&cfg.Listen, "listen", "127.0.0.1:50051", "gRPC listen address")
	flag.StringVar(&cfg.HTTPListen, "http-listen", "127.0.0.1:9090", `HTTP listen address for /healthz, /readyz and /metrics ("off" to disable)`)
	flag.StringVar(&cfg.Server.DataDir, "data-dir", "./data", "directory for durable weights, policies and the audit log")
	flag.IntVar(&cfg.Server.Limits.MaxPrefixBlocks, "max-prefix-blocks", 8192, "most prefix hashes one Pick may carry")
	flag.IntVar(&cfg.Server.Limits.MaxInstancesPerPool, "max-instances-per-pool", 4096, "most instances one pool may hold")
	flag.IntVar(&cfg.Server.Limits.MaxPools, "max-pools", 1024, "most pools the router may hold")
	flag.StringVar(&cfg.DecisionLog, "decision-log", "", "append sampled Picks with their full decision to this file as JSON lines (off when empty)")
	flag.Float64Var(&cfg.DecisionLogRate, "decision-log-rate", 0.01, "fraction of Picks the decision log samples, 0..1")
	flag.IntVar(&cfg.DecisionLogBuffer, "decision-log-buffer", server.DefaultDecisionLogBuffer, "sampled Picks held waiting for the disk before new ones are dropped")
	shutdown := flag.Duration("shutdown-timeout", 10*time.Second, "how long SIGTERM waits for in-flight calls and the telemetry flush")
	logLevel := flag.String("log-level", "info", "debug, info, warn or error")
	logFormat := flag.String("log-format", "text", "text or json")
	flag.Parse()

	log, err := server.NewLogger(os.Stderr, *logFormat, *logLevel)
	if err != nil {
		fmt.Fprintf(os.Stderr, "prefixrouted: --log-level / --log-format: %v\n", err)
		return 2
	}
	cfg.Server.Logger = log
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)

	d, err := server.Start(cfg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "prefixrouted: %v\n", err)
		return 1
	}
	code := 0
	select {
	case s := <-sig:
		log.Info("shutting down", "signal", s.String(), "timeout", shutdown.String())
	case err := <-d.Done():
		log.Error("gRPC server stopped", "err", err)
		code = 1
	}
	go func() {
		s := <-sig
		log.Error("second signal: exiting without finishing the shutdown", "signal", s.String())
		os.Exit(1)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), *shutdown)
	defer cancel()
	if err := d.Shutdown(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "prefixrouted: shutdown: %v\n", err)
		code = 1
	}
	log.Info("stopped", "exit_code", code)
	return code
}
