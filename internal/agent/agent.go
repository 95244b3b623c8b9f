// Package agent is prefixagent: it runs next to one vLLM or SGLang engine,
// scrapes the engine's /metrics into load reports and translates its
// ZeroMQ KV-cache events into the router's block hashes (internal/kvalign),
// and keeps the instance's ReportLoad stream open with pkg/client's
// Reporter, whose snapshot on every new stream is the agent's cache view.
//
// # Precise and approximate
//
// While the agent is sure of the engine's whole cache it reports cache
// events (reports_cache_events, the router's exact index). It is sure from
// the engine's first message (seq 0) or a complete replay from seq 0, and
// stays sure as long as every seq arrives in order. On a gap it asks the
// replay socket for the missing messages; when there is none, the replay
// fails or does not reach back far enough, or a message is malformed, the
// view is unknown: the agent reopens the stream without cache events (the
// router drops the instance's exact entries and guesses its cache from the
// requests it routes, the approximate index) until the engine clears its
// cache (AllBlocksCleared) or restarts (seq 0 again).
//
// # Engine down
//
// When no scrape has succeeded for EngineTimeout the Reporter holds its
// reports (ReporterOptions.Hold), so the router marks the instance stale
// after the pool's stale_after and stops sending it requests.
//
// An Agent's methods are safe for concurrent use.
package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"

	"github.com/prefixroute/prefixroute/internal/enginemetrics"
	"github.com/prefixroute/prefixroute/internal/kvalign"
	"github.com/prefixroute/prefixroute/pkg/client"
	"github.com/prefixroute/prefixroute/pkg/prefixhash"
)

// Defaults of Config.
const (
	DefaultScrapeInterval = 50 * time.Millisecond
	DefaultEngineTimeout  = time.Second
	DefaultReplayTimeout  = 2 * time.Second
	// DefaultMaxBlocks bounds the aligner when the engine reports no
	// capacity: 1,048,576 blocks (about 100 MiB of map).
	DefaultMaxBlocks = 1 << 20
)

// Config configures an Agent.
type Config struct {
	Engine     enginemetrics.Engine
	MetricsURL string
	// KVEvents is the engine's publisher endpoint; "" reports load only.
	KVEvents string
	// KVEventsBind listens on KVEvents (for an engine that connects).
	KVEventsBind bool
	// KVEventsReplay is the engine's replay (ROUTER) endpoint; "" for none.
	KVEventsReplay string
	// Topic is the publisher's topic ("" by default in both engines).
	Topic string
	// DPRank is the engine data-parallel rank this agent reports; batches
	// of other ranks are dropped.
	DPRank int64
	// Pool, Deployment, InstanceID, Address name the instance.
	Pool, Deployment, InstanceID, Address string
	// Salt is the hash salt the pool's gateways use (PickerOptions.Salt).
	Salt string
	// Role is the instance's prefill/decode role: both, prefill, decode,
	// or "" to take the engine's (SGLang's engine_type label; vLLM's
	// kv_role is not on its /metrics page, so a vLLM prefill or decode
	// instance needs it set), both when the engine does not say. A role
	// the engine contradicts fails Run (ErrRole).
	Role string
	// BlockSize is the pool's block size in tokens; 0 takes the engine's
	// (cache_config_info). When both are known and differ, Run fails.
	BlockSize int
	// MaxBlocks bounds the aligner; 0 takes 2 × the engine's capacity, or
	// DefaultMaxBlocks.
	MaxBlocks int
	// ScrapeInterval, EngineTimeout and ReplayTimeout default to the
	// constants above.
	ScrapeInterval, EngineTimeout, ReplayTimeout time.Duration
	// KVEventsSilentAfter is how long after start, with KVEvents set and
	// no message received, the agent warns (liveness.go). Default
	// DefaultKVEventsSilentAfter.
	KVEventsSilentAfter time.Duration
	// ReporterMinBackoff/MaxBackoff are passed to the Reporter (0:
	// its defaults).
	ReporterMinBackoff, ReporterMaxBackoff time.Duration
	// Link, when set, carries the instance's reports on the link's
	// ReportLoadBatch stream with the other Agents of this process
	// (ReporterOptions.Link): one message per tick for all the engines of
	// a host. Default nil: a ReportLoad stream of its own.
	Link *client.BatchLink
	// LabelMetrics adds instance_id to every prefixagent_* series, so that
	// the series of several Agents in one process (GroupHandler) differ.
	LabelMetrics bool
	HTTPClient   *http.Client
	Logger       *slog.Logger
}

// Agent is one running prefixagent.
type Agent struct {
	cfg  Config
	cc   grpc.ClientConnInterface
	log  *slog.Logger
	seed uint64
	m    *metrics

	lastOK  atomic.Int64 // unix nanos of the last good scrape
	turn    atomic.Int64 // unix nanos of the scrape loop's last turn
	running atomic.Bool  // Run is running
	kvSeen  atomic.Bool  // a KV event message arrived

	kvMu     sync.Mutex
	kvSilent bool // the silence warning is on

	mu      sync.Mutex
	load    client.Load
	est     enginemetrics.Estimator
	al      *kvalign.Aligner // nil until the block size is known
	exact   bool
	rep     *client.Reporter
	blk     chan struct{} // closed once the block size is known
	blkOnce sync.Once
}

// New checks cfg and returns an Agent that reports over cc (normally from
// client.Dial or client.DialWith; the Agent does not own it).
func New(cc grpc.ClientConnInterface, cfg Config) (*Agent, error) {
	switch {
	case cfg.Engine == 0:
		return nil, errors.New("agent: no engine (vllm or sglang)")
	case cfg.MetricsURL == "":
		return nil, errors.New("agent: no metrics URL")
	case cfg.Pool == "" || cfg.Deployment == "" || cfg.InstanceID == "" || cfg.Address == "":
		return nil, errors.New("agent: pool, deployment, instance id and address are required")
	case cfg.BlockSize < 0 || cfg.MaxBlocks < 0:
		return nil, errors.New("agent: block size and max blocks must not be negative")
	}
	if err := checkRole(cfg.Role); err != nil {
		return nil, err
	}
	def := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&cfg.ScrapeInterval, DefaultScrapeInterval)
	def(&cfg.EngineTimeout, DefaultEngineTimeout)
	def(&cfg.ReplayTimeout, DefaultReplayTimeout)
	def(&cfg.KVEventsSilentAfter, DefaultKVEventsSilentAfter)
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: max(cfg.EngineTimeout/2, 100*time.Millisecond)}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Agent{cfg: cfg, cc: cc, log: cfg.Logger, seed: prefixhash.Seed(cfg.Pool, cfg.Salt),
		m: newMetrics(cfg.labels()), blk: make(chan struct{})}, nil
}

// labels are the constant labels of the agent's series.
func (c *Config) labels() map[string]string {
	if !c.LabelMetrics {
		return nil
	}
	return map[string]string{"instance_id": c.InstanceID}
}

// Handler serves the agent's /metrics, /healthz, /livez and /status.
func (a *Agent) Handler() http.Handler { return GroupHandler([]*Agent{a}) }

// healthy says why the agent is unhealthy, or "".
func (a *Agent) healthy() string {
	if !a.engineUp() {
		return fmt.Sprintf("no successful scrape of %s for %s", a.cfg.MetricsURL, a.cfg.EngineTimeout)
	}
	a.mu.Lock()
	rep := a.rep
	a.mu.Unlock()
	if rep == nil || !rep.Stats().Connected {
		return "the report stream to the router is not connected"
	}
	return ""
}

func (a *Agent) engineUp() bool {
	t := a.lastOK.Load()
	return t != 0 && time.Since(time.Unix(0, t)) <= a.cfg.EngineTimeout
}

// Exact reports whether the agent currently reports the cache exactly.
func (a *Agent) Exact() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.exact
}

// Run scrapes and translates until ctx ends (nil) or the engine's block
// size contradicts the pool's (an error naming both).
func (a *Agent) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	a.running.Store(true)
	defer a.running.Store(false)
	a.setMode(false)
	defer func() {
		a.mu.Lock()
		rep := a.rep
		a.rep = nil
		a.mu.Unlock()
		if rep != nil {
			if err := rep.Close(); err != nil {
				a.log.Warn("prefixagent: closing the report stream", "err", err)
			}
		}
	}()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := a.scrapeLoop(ctx); err != nil {
			cancel(err)
		}
	}()
	if a.cfg.KVEvents != "" {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := a.eventLoop(ctx); err != nil {
				cancel(err)
			}
		}()
		wg.Add(1)
		go func() {
			defer wg.Done()
			a.watchSilence(ctx)
		}()
	}
	<-ctx.Done()
	wg.Wait()
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// setMode opens a Reporter with (exact) or without cache events, replacing
// the current one when its mode differs. Called from one goroutine at a
// time (Run, then the event loop), never with a.mu held.
func (a *Agent) setMode(exact bool) {
	a.mu.Lock()
	old := a.rep
	if old != nil && a.exact == exact {
		a.mu.Unlock()
		return
	}
	a.rep, a.exact = nil, exact
	// With a.exact, under the lock: whoever sees Exact() sees the gauge.
	a.m.exact.Set(b2f(exact))
	a.mu.Unlock()
	if old != nil {
		if err := old.Close(); err != nil {
			a.log.Warn("prefixagent: closing the report stream to reopen it", "exact", exact, "err", err)
		}
	}
	opts := client.ReporterOptions{Pool: a.cfg.Pool, Deployment: a.cfg.Deployment, InstanceID: a.cfg.InstanceID,
		Address: a.cfg.Address, Load: a.currentLoad, CacheEvents: exact, Hold: func() bool { return !a.engineUp() },
		MinBackoff: a.cfg.ReporterMinBackoff, MaxBackoff: a.cfg.ReporterMaxBackoff, Logger: a.log, Link: a.cfg.Link}
	if exact {
		opts.Snapshot = a.snapshot
	}
	rep, err := client.NewReporter(a.cc, opts)
	if err != nil {
		panic(err) // the options were checked in New
	}
	a.mu.Lock()
	a.rep = rep
	a.mu.Unlock()
	a.log.Info("prefixagent: reporting", "cache", map[bool]string{true: "precise (cache events)", false: "approximate (load only)"}[exact])
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// currentLoad is the Reporter's Load callback.
func (a *Agent) currentLoad() client.Load {
	a.mu.Lock()
	defer a.mu.Unlock()
	if t := a.lastOK.Load(); t != 0 {
		a.m.reportLag.Set(time.Since(time.Unix(0, t)).Seconds())
	}
	return a.load
}

// snapshot is the exact Reporter's Snapshot callback.
func (a *Agent) snapshot() []uint64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.al == nil {
		return nil
	}
	return a.al.Snapshot(nil)
}
