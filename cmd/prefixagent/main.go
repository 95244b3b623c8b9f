// Command prefixagent runs next to one vLLM or SGLang engine (or, with
// --instance, every engine of a host, on one report stream) and keeps its
// load and KV-cache contents in prefixrouted: see internal/agent and the
// docs/engines.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/prefixroute/prefixroute/internal/agent"
	"github.com/prefixroute/prefixroute/internal/buildinfo"
	"github.com/prefixroute/prefixroute/internal/enginemetrics"
	"github.com/prefixroute/prefixroute/internal/netaddr"
	"github.com/prefixroute/prefixroute/pkg/client"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// run runs prefixagent with args until ctx ends; it returns the exit code
// (2 for a usage error, 1 for a failure).
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	host, _ := os.Hostname()
	fs := flag.NewFlagSet("prefixagent", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c agent.Config
	var engine, router, httpListen, tokenFile, ca, cert, key, serverName string
	var useTLS, version bool
	var instances instanceFlags
	fs.StringVar(&engine, "engine", "", "the model server: vllm or sglang (required)")
	fs.StringVar(&c.MetricsURL, "metrics-url", "http://127.0.0.1:8000/metrics", "the engine's Prometheus endpoint")
	fs.DurationVar(&c.ScrapeInterval, "scrape-interval", agent.DefaultScrapeInterval, "time between scrapes of --metrics-url")
	fs.DurationVar(&c.EngineTimeout, "engine-timeout", agent.DefaultEngineTimeout, "without a good scrape for this long the agent holds its reports (the instance goes stale)")
	fs.StringVar(&c.KVEvents, "kv-events", "", "the engine's KV event publisher, e.g. tcp://127.0.0.1:5557; empty: load only, the router guesses the cache")
	fs.BoolVar(&c.KVEventsBind, "kv-events-bind", false, "listen on --kv-events (when the engine's endpoint has no '*', it connects)")
	fs.StringVar(&c.KVEventsReplay, "kv-events-replay", "", "the engine's replay endpoint, e.g. tcp://127.0.0.1:5558 (recovers missed messages)")
	fs.DurationVar(&c.KVEventsSilentAfter, "kv-events-silent-after", agent.DefaultKVEventsSilentAfter, "with --kv-events set and no message received this long after start, warn (log, prefixagent_kv_events_silent, /status): wrong endpoint or port?")
	fs.StringVar(&c.Topic, "kv-events-topic", "", "the publisher's topic (the engines' default is empty)")
	fs.Int64Var(&c.DPRank, "data-parallel-rank", 0, "the engine's data-parallel rank this agent reports (one agent per rank)")
	fs.StringVar(&router, "router", "127.0.0.1:50051", "prefixrouted's gRPC address")
	fs.StringVar(&tokenFile, "token-file", "", "file whose first line is the bearer token (role instance)")
	fs.BoolVar(&useTLS, "tls", false, "use TLS to the router (implied by the other --tls-* flags)")
	fs.StringVar(&ca, "tls-ca", "", "PEM CA that signed the router's certificate")
	fs.StringVar(&cert, "tls-cert", "", "PEM client certificate for mutual TLS")
	fs.StringVar(&key, "tls-key", "", "PEM key of --tls-cert")
	fs.StringVar(&serverName, "tls-server-name", "", "name the router's certificate must carry")
	fs.StringVar(&c.Pool, "pool", "", "the pool (model) name (required)")
	fs.StringVar(&c.Deployment, "deployment", "", "the deployment (required)")
	fs.StringVar(&c.InstanceID, "instance-id", host, "the instance id")
	fs.StringVar(&c.Address, "address", "", "what gateways send this instance's traffic to, host:port (required without --instance)")
	fs.Var(&instances, "instance", instanceUsage)
	fs.StringVar(&c.Salt, "hash-salt", "", "the prefix-hash salt of the pool's gateways (PickerOptions.Salt)")
	fs.StringVar(&c.Role, "role", "", "prefill/decode role: both, prefill or decode; empty takes SGLang's (engine_type label, --disaggregation-mode), else both; vLLM's kv_role is not on /metrics: set it")
	fs.IntVar(&c.BlockSize, "block-size", 0, "the pool's block size in tokens; 0 takes the engine's (cache_config_info); a mismatch is an error")
	fs.IntVar(&c.MaxBlocks, "max-blocks", 0, "bound of the engine-hash map in blocks; 0: 2 x the engine's capacity")
	fs.StringVar(&httpListen, "http-listen", "127.0.0.1:9091", "address of the agent's /metrics, /healthz (engine and router reachable), /livez (agent running) and /status; off disables")
	fs.BoolVar(&version, "version", false, "print the version and exit")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if version {
		fmt.Fprintln(stdout, versionString())
		return 0
	}
	usage := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "prefixagent: "+format+"\n", a...)
		return 2
	}
	var err error
	if c.Engine, err = enginemetrics.ParseEngine(engine); err != nil {
		return usage("--engine: %v", err)
	}
	if fs.NArg() > 0 {
		return usage("unexpected arguments %q", fs.Args())
	}
	var o client.DialOptions
	if useTLS || ca != "" || cert != "" || key != "" || serverName != "" {
		if o.TLS, err = client.TLSConfig(ca, cert, key, serverName); err != nil {
			return usage("--tls-*: %v", err)
		}
	}
	if tokenFile != "" {
		if o.Token, err = client.ReadTokenFile(tokenFile); err != nil {
			return usage("--token-file: %v", err)
		}
		if o.TLS == nil && !netaddr.IsLoopback(router) {
			return usage("--token-file without TLS to %s: the token would cross the network in cleartext; pass --tls-ca (or --tls)", router)
		}
		o.InsecureToken = o.TLS == nil
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	c.Logger = log
	cc, err := client.DialWith(router, o)
	if err != nil {
		return usage("--router: %v", err)
	}
	defer cc.Close()
	cfgs := []agent.Config{c}
	if len(instances) > 0 {
		if cfgs, err = instances.configs(c); err != nil {
			return usage("%v", err)
		}
		link, err := client.NewBatchLink(cc, client.BatchLinkOptions{})
		if err != nil {
			return usage("%v", err)
		}
		for i := range cfgs {
			cfgs[i].Link, cfgs[i].Logger = link, log.With("instance", cfgs[i].InstanceID)
		}
	}
	var agents []*agent.Agent
	for _, c := range cfgs {
		a, err := agent.New(cc, c)
		if err != nil {
			return usage("%v", strings.TrimPrefix(err.Error(), "agent: "))
		}
		agents = append(agents, a)
	}
	if httpListen != "off" {
		l, err := net.Listen("tcp", httpListen)
		if err != nil {
			fmt.Fprintf(stderr, "prefixagent: --http-listen: %v\n", err)
			return 1
		}
		srv := &http.Server{Handler: agent.GroupHandler(agents), ReadHeaderTimeout: 5 * time.Second}
		go func() {
			if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error("prefixagent: /metrics server stopped", "err", err)
			}
		}()
		defer func() {
			if err := srv.Close(); err != nil {
				log.Warn("prefixagent: closing the /metrics server", "err", err)
			}
		}()
		log.Info("prefixagent: serving /metrics, /healthz, /livez and /status", "addr", l.Addr().String())
	}
	for _, c := range cfgs {
		log.Info("prefixagent: started", "version", versionString(), "engine", c.Engine.String(), "router", router,
			"pool", c.Pool, "instance", c.InstanceID, "kv_events", c.KVEvents)
	}
	if err := runAll(ctx, agents); err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintf(stderr, "prefixagent: %v\n", err)
		return 1
	}
	return 0
}

// versionString is the binary's build (internal/buildinfo: the version
// 'make build' stamps, else the module's; the VCS revision).
func versionString() string { return "prefixagent " + buildinfo.Read().String() }
