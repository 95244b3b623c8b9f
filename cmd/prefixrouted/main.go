// Command prefixrouted is the prefixroute sidecar: gateways ask it which
// model-server instance should serve each request. See README.md and
// README "Operating prefixrouted".
package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/prefixroute/prefixroute/daemon"
	"github.com/prefixroute/prefixroute/internal/auth"
	"github.com/prefixroute/prefixroute/internal/cluster"
	"github.com/prefixroute/prefixroute/internal/readiness"
	"github.com/prefixroute/prefixroute/internal/state"
	"github.com/prefixroute/prefixroute/server"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "hash-token" {
		os.Exit(hashToken(os.Args[2:], os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(run())
}

// run parses the flags, serves until SIGTERM or SIGINT, shuts down and
// returns the exit code: 0 after a clean shutdown.
func run() int {
	var cfg daemon.Config
	flag.StringVar(&cfg.Listen, "listen", daemon.DefaultListen, "gRPC listen address")
	flag.StringVar(&cfg.HTTPListen, "http-listen", daemon.DefaultHTTPListen, `HTTP listen address for /healthz, /readyz, /metrics, the HTTP front ends /v1/route and /v1/pick and the console /ui/ ("off" to disable); loopback unless --tokens-file is set`)
	flag.StringVar(&cfg.MetricsListen, "metrics-listen", daemon.DefaultMetricsListen, `read-only HTTP listen address for /healthz, /readyz and /metrics alone, allowed on any address without --tokens-file ("off" to disable)`)
	flag.StringVar(&cfg.Server.DataDir, "data-dir", "./data", "directory for durable weights, policies and the audit log")
	flag.IntVar(&cfg.Server.Limits.MaxPrefixBlocks, "max-prefix-blocks", state.DefaultMaxPrefixBlocks, "most prefix hashes one Pick may carry")
	flag.IntVar(&cfg.Server.Limits.MaxInstancesPerPool, "max-instances-per-pool", state.DefaultMaxInstancesPerPool, "most instances one pool may hold")
	flag.IntVar(&cfg.Server.Limits.MaxPools, "max-pools", state.DefaultMaxPools, "most pools the router may hold")
	flag.IntVar(&cfg.Server.Limits.MaxBlocksPerInstance, "max-blocks-per-instance", state.DefaultMaxBlocksPerInstance, "most prefix-index blocks held for one instance, whatever kv_capacity_blocks it reports")
	flag.IntVar(&cfg.Server.Limits.MaxIndexPairs, "max-index-pairs", 0, "most prefix-index (block, instance) pairs over all pools, about 165 bytes of RSS each (0: 60% of the cgroup memory limit or GOMEMLIMIT, whichever is smaller, else 67108864)")
	flag.DurationVar(&cfg.Server.Migration.Window, "migration-window", readiness.DefaultWindow,
		fmt.Sprintf("window of picks GetMigrationStatus reads (prefixctl migration), in %d buckets", readiness.DefaultBuckets))
	flag.StringVar(&cfg.DecisionLog, "decision-log", "", "append sampled Picks with their full decision to this file as JSON lines (off when empty)")
	flag.Float64Var(&cfg.DecisionLogRate, "decision-log-rate", 0.01, "fraction of Picks the decision log samples, 0..1")
	flag.IntVar(&cfg.DecisionLogBuffer, "decision-log-buffer", server.DefaultDecisionLogBuffer, "sampled Picks held waiting for the disk before new ones are dropped")
	securityFlags(&cfg)
	nats := clusterFlags()
	ext := newExtprocFlags(flag.CommandLine)
	shutdown := flag.Duration("shutdown-timeout", 10*time.Second, "how long SIGTERM waits for in-flight calls and the telemetry flush")
	logLevel := flag.String("log-level", "info", "debug, info, warn or error")
	logFormat := flag.String("log-format", "text", "text or json")
	flag.DurationVar(&cfg.Server.ReportInterval, "report-interval", 100*time.Millisecond, "report interval the router's acks ask instances for")
	if code, done := parseFlags(flag.CommandLine, os.Args[1:], os.Stdout, os.Stderr); done {
		return code
	}

	log, err := newLogger(os.Stderr, *logFormat, *logLevel)
	if err != nil {
		fmt.Fprintf(os.Stderr, "prefixrouted: --log-level / --log-format: %v\n", err)
		return 2
	}
	cfg.Server.Logger = log
	if nats.catchUp != "snapshot" {
		fmt.Fprintf(os.Stderr, "prefixrouted: --nats-catch-up %q: only snapshot remains (resend was removed); drop the flag\n", nats.catchUp)
		return 2
	}
	cfg.Server.Cluster = nats.config()
	fe, err := ext.frontEnd()
	if err != nil {
		fmt.Fprintf(os.Stderr, "prefixrouted: %v\n", err)
		return 2
	}
	cfg.FrontEnds = append(cfg.FrontEnds, fe)
	cfg.Gateway, _ = ext.gateway() // checked by frontEnd; POST /v1/route maps as ext_proc does
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)

	d, err := daemon.Start(cfg)
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

// securityFlags are the flags of SECURITY.md: authentication, TLS and the
// transport limits.
func securityFlags(cfg *daemon.Config) {
	flag.StringVar(&cfg.TokensFile, "tokens-file", "", "identities, roles and token hashes (SECURITY.md); reloaded on change. Without it every call is allowed and listeners must be on loopback")
	flag.StringVar(&cfg.TLS.CertFile, "tls-cert", "", "PEM certificate (chain) of both listeners; reloaded on change")
	flag.StringVar(&cfg.TLS.KeyFile, "tls-key", "", "PEM private key of --tls-cert")
	flag.StringVar(&cfg.TLS.ClientCAFile, "tls-client-ca", "", "PEM CA bundle verifying client certificates, which the tokens file maps to identities")
	flag.BoolVar(&cfg.Insecure, "insecure", false, "allow non-loopback listeners without --tokens-file, or gRPC without TLS")
	flag.IntVar(&cfg.MaxRecvMsgBytes, "max-message-bytes", daemon.DefaultMaxRecvMsgBytes, "largest gRPC message accepted")
	flag.IntVar(&cfg.Transport.MaxConnections, "max-connections", daemon.DefaultMaxConnections, "open gRPC connections; more wait to be accepted")
	flag.IntVar(&cfg.Transport.MaxReportStreams, "max-report-streams", daemon.DefaultMaxReportStreams, "open ReportLoad streams per daemon")
	flag.Float64Var(&cfg.Transport.ReportsPerSecond, "max-reports-per-second", daemon.DefaultReportsPerSecond, "reports per second per stream (token bucket)")
	flag.IntVar(&cfg.Transport.ReportBurst, "report-burst", daemon.DefaultReportBurst, "burst of the per-stream report token bucket")
	flag.DurationVar(&cfg.Transport.FirstReportTimeout, "first-report-timeout", daemon.DefaultFirstReportTimeout, "how long a new report stream may wait before its first report, and a ReportLoadBatch stream may carry no open instance")
}

// natsFlags are the flags of "Running several replicas" (README).
type natsFlags struct {
	urls, name, creds, nkey, user, tlsCA, tlsCert, tlsKey, bucket, prefix, catchUp string
	replicas                                                                       int
}

func clusterFlags() *natsFlags {
	f := &natsFlags{}
	flag.StringVar(&f.urls, "nats", "", "NATS server URL(s), comma-separated: share weights, policies, ramps, reports and picks with the other replicas (off when empty)")
	flag.StringVar(&f.name, "nats-name", "", "this replica's unique name in the cluster (default host-pid-random)")
	flag.StringVar(&f.creds, "nats-creds", "", "NATS credentials file (JWT + NKey)")
	flag.StringVar(&f.nkey, "nats-nkey", "", "NATS NKey seed file")
	flag.StringVar(&f.user, "nats-user", "", "NATS user; the password is read from $PREFIXROUTED_NATS_PASSWORD")
	flag.StringVar(&f.tlsCA, "nats-tls-ca", "", "PEM CA bundle verifying the NATS server")
	flag.StringVar(&f.tlsCert, "nats-tls-cert", "", "PEM client certificate for NATS")
	flag.StringVar(&f.tlsKey, "nats-tls-key", "", "PEM private key of --nats-tls-cert")
	flag.StringVar(&f.bucket, "nats-bucket", "prefixroute", "JetStream key-value bucket holding the pools' configuration")
	flag.StringVar(&f.prefix, "nats-subject-prefix", "prefixroute", "subject prefix of the replicas' events and snapshots")
	flag.IntVar(&f.replicas, "nats-replicas", 1, "JetStream replicas of the bucket when this replica creates it")
	flag.StringVar(&f.catchUp, "nats-catch-up", "snapshot", "deprecated, accepts only snapshot: a joining replica learns the others' instances from one peer")
	return f
}

// config returns the cluster configuration, nil when --nats is empty.
func (f *natsFlags) config() *cluster.Config {
	if f.urls == "" {
		return nil
	}
	return &cluster.Config{URLs: strings.Split(f.urls, ","), Name: f.name, CredentialsFile: f.creds, NKeySeedFile: f.nkey,
		User: f.user, Password: os.Getenv("PREFIXROUTED_NATS_PASSWORD"), TLSCAFile: f.tlsCA, TLSCertFile: f.tlsCert,
		TLSKeyFile: f.tlsKey, Bucket: f.bucket, SubjectPrefix: f.prefix, Replicas: f.replicas}
}

// hashToken is "prefixrouted hash-token": it prints the SHA-256 the tokens
// file stores for the token read from stdin, or, with -generate, a new
// random token and its hash.
func hashToken(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("hash-token", flag.ContinueOnError)
	fs.SetOutput(stderr)
	gen := fs.Bool("generate", false, "print a new random token and its hash instead of reading one")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: prefixrouted hash-token < token-file    (prints the token's token_sha256)")
		fmt.Fprintln(stderr, "       prefixrouted hash-token -generate      (prints a new token and its token_sha256)")
	}
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 {
		fs.Usage()
		return 2
	}
	if *gen {
		b := make([]byte, 32)
		rand.Read(b)
		token := base64.RawURLEncoding.EncodeToString(b)
		fmt.Fprintf(stdout, "token: %s\ntoken_sha256: %s\n", token, auth.HashToken(token))
		return 0
	}
	line, err := bufio.NewReader(io.LimitReader(stdin, 4096)).ReadString('\n')
	token := strings.TrimRight(line, "\r\n")
	if err != nil && err != io.EOF || len(token) < 16 {
		fmt.Fprintln(stderr, "prefixrouted hash-token: want a token of at least 16 characters on stdin (or use -generate)")
		return 2
	}
	fmt.Fprintln(stdout, auth.HashToken(token))
	return 0
}
