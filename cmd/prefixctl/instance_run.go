package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"

	"github.com/prefixroute/prefixroute/pkg/client"
)

// instanceRun is 'prefixctl instance run POOL DEPLOYMENT ID --address A ...':
// a test and demo stand-in for a model-server instance, reporting fixed
// load figures through pkg/client's Reporter.
func (c *cli) instanceRun(fs *pflag.FlagSet) runner {
	address := fs.String("address", "", "the address `A` gateways would connect to (required)")
	queueMs := fs.Float64("queue-ms", -1, "report a queue estimate of `X` ms (default: none, 0 queued tokens)")
	tps := fs.Float64("tps", 10000, "prefill throughput of `N` tok/s")
	kvUsage := fs.Float64("kv-usage", 0, "KV-cache usage `F`, 0..1")
	blockSize := fs.Uint("block-size", 16, "KV block size of `N` tokens")
	cacheEvents := fs.Bool("cache-events", false, "report KV-cache events (exact prefix index)")
	stored := fs.String("stored", "", "block hashes `H,...` to report as cached (implies --cache-events)")
	draining := fs.Bool("draining", false, "report draining")
	forD := fs.Duration("for", 0, "stop after `D` (default: run until interrupted)")
	return func(pos []string) error {
		hashes, err := parseHashes(*stored)
		if err != nil {
			return usagef("--stored: %v", err)
		}
		switch {
		case *address == "":
			return usagef("--address is required: the address gateways would connect to, e.g. 10.0.0.7:8000")
		case *kvUsage < 0 || *kvUsage > 1:
			return usagef("--kv-usage %v: want a fraction in [0, 1]", *kvUsage)
		case *tps < 0:
			return usagef("--tps %v: want a throughput >= 0", *tps)
		case *forD < 0:
			return usagef("--for %v: want a duration >= 0", *forD)
		case *blockSize > 1<<20:
			return usagef("--block-size %d: the limit is %d", *blockSize, 1<<20)
		}
		load := client.Load{PrefillTokensPerSecond: *tps, KVCacheUsage: *kvUsage, BlockSizeTokens: uint32(*blockSize),
			Draining: *draining}
		if *queueMs >= 0 {
			load.QueueMs, load.HasQueueMs = *queueMs, true
		}
		cc, err := c.conn()
		if err != nil {
			return err
		}
		log := slog.New(slog.NewTextHandler(c.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
		r, err := client.NewReporter(cc, client.ReporterOptions{
			Pool: pos[0], Deployment: pos[1], InstanceID: pos[2], Address: *address,
			Load: func() client.Load { return load }, CacheEvents: *cacheEvents || len(hashes) > 0, Logger: log,
		})
		if err != nil {
			return usagef("%v", err)
		}
		r.Stored(hashes...)
		fmt.Fprintf(c.stdout, "instance %s (pool %s, deployment %s, address %s) reporting to %s; test/demo tool, stop with Ctrl-C\n",
			pos[2], pos[0], pos[1], *address, c.addr)

		ctx, stop := signal.NotifyContext(c.ctx, os.Interrupt, syscall.SIGTERM)
		defer stop()
		if *forD > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, *forD)
			defer cancel()
		}
		<-ctx.Done()
		// Close first: it waits for the stream's end, before which the
		// sidecar acks every report it applied, so an ack still in flight
		// now is counted.
		if err := r.Close(); err != nil {
			return err
		}
		st := r.Stats()
		fmt.Fprintf(c.stdout, "instance %s stopped: reports %d, acks %d, streams %d\n", pos[2], st.Reports, st.Acks, st.Streams)
		if st.Acks == 0 {
			if st.LastError != nil {
				return st.LastError
			}
			return &exitError{code: exitUnreachable, msg: fmt.Sprintf(
				"the sidecar at %s acknowledged no report; check that it runs and --addr", c.addr)}
		}
		return nil
	}
}
