// Command prefixrouted is the prefixroute sidecar: gateways ask it which
// model-server instance should serve each request. See README.md.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prefixroute/prefixroute/server"
)

func main() {
	var cfg server.DaemonConfig
	flag.StringVar(&cfg.Listen, "listen", "127.0.0.1:50051", "gRPC listen address")
	flag.StringVar(&cfg.HTTPListen, "http-listen", "127.0.0.1:9090", `HTTP listen address for /healthz, /readyz and /metrics ("off" to disable)`)
	flag.StringVar(&cfg.Server.DataDir, "data-dir", "./data", "directory for durable weights, policies and the audit log")
	flag.IntVar(&cfg.Server.Limits.MaxPrefixBlocks, "max-prefix-blocks", 8192, "most prefix hashes one Pick may carry")
	flag.IntVar(&cfg.Server.Limits.MaxInstancesPerPool, "max-instances-per-pool", 4096, "most instances one pool may hold")
	flag.IntVar(&cfg.Server.Limits.MaxPools, "max-pools", 1024, "most pools the router may hold")
	shutdown := flag.Duration("shutdown-timeout", 10*time.Second, "how long SIGTERM waits for in-flight calls")
	logLevel := flag.String("log-level", "info", "debug, info, warn or error")
	flag.Parse()

	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		fmt.Fprintf(os.Stderr, "prefixrouted: --log-level %q: want debug, info, warn or error\n", *logLevel)
		os.Exit(2)
	}
	cfg.Server.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))

	d, err := server.Start(cfg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "prefixrouted: %v\n", err)
		os.Exit(1)
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	select {
	case s := <-sig:
		cfg.Server.Logger.Info("shutting down", "signal", s.String(), "timeout", shutdown.String())
	case err := <-d.Done():
		cfg.Server.Logger.Error("gRPC server stopped", "err", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), *shutdown)
	defer cancel()
	if err := d.Shutdown(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "prefixrouted: shutdown: %v\n", err)
		os.Exit(1)
	}
}
