package client

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
)

// Load is an instance's load at one moment, as its Load callback returns it.
// The fields are those of a ReportLoadRequest.
type Load struct {
	RunningRequests uint32
	WaitingRequests uint32
	// QueuedPrefillTokens is the prefill work queued or running, in tokens.
	QueuedPrefillTokens uint64
	// QueueMs is the instance's own estimate of its queued and running
	// prefill time in ms; sent only when HasQueueMs is true, and then used
	// by the sidecar instead of QueuedPrefillTokens.
	QueueMs    float64
	HasQueueMs bool
	// KVCacheUsage is the used fraction of the KV cache, 0..1.
	KVCacheUsage     float64
	KVCapacityBlocks uint64
	// PrefillTokensPerSecond is the instance's prefill throughput; 0 lets
	// the sidecar use the pool's default.
	PrefillTokensPerSecond float64
	BlockSizeTokens        uint32
	// Draining asks the sidecar to send no new requests.
	Draining bool
	// Role is the instance's prefill/decode role (PD_ROLE_UNSPECIFIED:
	// both), sent in every report.
	Role pb.PdRole
}

// Reporter defaults.
const (
	DefaultReportInterval = 100 * time.Millisecond
	DefaultMinBackoff     = 100 * time.Millisecond
	DefaultMaxBackoff     = 10 * time.Second
	DefaultCloseTimeout   = 2 * time.Second
	DefaultFlushGap       = 25 * time.Millisecond
	DefaultAckInterval    = time.Second
	// MaxAckInterval is the longest AckInterval the sidecar accepts
	// (server.MaxAckIntervalMs).
	MaxAckInterval = time.Minute
)

// ReporterOptions configures a Reporter. Zero fields take the defaults
// stated.
type ReporterOptions struct {
	// Pool, Deployment, InstanceID and Address name the instance; all
	// required, and fixed for the Reporter's life (every stream it opens
	// carries the same identity). Address is what gateways connect to.
	Pool, Deployment, InstanceID, Address string
	// Load returns the instance's current load. Required. It is called
	// once per report from the Reporter's goroutine, never concurrently
	// with itself; it may call Stored, Removed and Cleared, but not Close.
	Load func() Load
	// CacheEvents makes the instance stream its KV-cache events
	// (reports_cache_events): the sidecar then keeps an exact index of its
	// blocks instead of guessing them from the requests it routed. Without
	// it, Stored, Removed and Cleared do nothing.
	CacheEvents bool
	// Snapshot returns every block hash the instance's KV cache holds now.
	// Each new stream (the first, and every reconnect) starts with it as a
	// full snapshot (cache_cleared plus stored_block_hashes), then streams
	// the events queued since. It is called from the Reporter's goroutine
	// without the Reporter's lock held; the Reporter does not keep the
	// slice. Call Stored and Removed only after the change is visible to
	// Snapshot (or under the same lock), or a snapshot may miss it.
	//
	// When nil (the default) the Reporter tracks the held set itself from
	// Stored, Removed and Cleared, at about 40 bytes per block: convenient,
	// but it duplicates the instance's own index.
	Snapshot func() []uint64
	// Hold, when set, is called before each report from the Reporter's
	// goroutine; while it returns true nothing is sent (queued events
	// wait), so the sidecar sees the instance go stale after its
	// stale_after and ends the stream after forget_after. For an agent
	// whose model server stopped answering. Default nil: never hold.
	Hold func() bool
	// FlushGap paces the early reports Flush asks for: up to 20 at once,
	// then one per FlushGap (a later Flush waits until FlushGap after the
	// latest report). Default DefaultFlushGap (25ms: at most 40 early
	// reports/s, which with the periodic ones stays under the sidecar's
	// default limit of 50 per stream).
	FlushGap time.Duration
	// Interval is the report interval until the sidecar's first ack, which
	// names the interval it wants (report_interval_ms); the Reporter then
	// follows the sidecar. Default DefaultReportInterval (100ms).
	Interval time.Duration
	// AckInterval asks the sidecar for at most one ack per AckInterval
	// (ack_interval_ms, whole milliseconds): each ack then covers every
	// report before it, and an instance reporting every 100 ms costs the
	// sidecar a tenth of the acks. The first report and the stream's end
	// are acked at once. Default
	// DefaultAckInterval (1s); negative: an ack for every report; at most
	// MaxAckInterval (60s). A sidecar older than this option acks every
	// report, which the Reporter handles the same way.
	AckInterval time.Duration
	// MinBackoff and MaxBackoff bound the wait before reconnecting after a
	// stream fails: the first retry after a stream that worked (a sidecar
	// restart) waits MinBackoff ± 50%; the n-th consecutive failure after
	// it a uniformly random time in [0, min(MaxBackoff, MinBackoff*2^n)]
	// ("full jitter", so that a fleet does not reconnect in lockstep). A
	// wait ends early when the connection (a *grpc.ClientConn) becomes
	// ready again after it was lost, so a restarted sidecar is reached
	// again as soon as the connection's own backoff (Dial's
	// ReconnectMaxDelay, 1 s) finds it. The reconnect is logged at INFO
	// with its time and attempts (ReporterStats.LastReconnect). Defaults
	// DefaultMinBackoff (100ms) and DefaultMaxBackoff (10s).
	MinBackoff, MaxBackoff time.Duration
	// MaxEventsPerMessage bounds the block events of one message. Default
	// MaxEventsPerMessage (65536), the sidecar's default limit; set it to
	// the sidecar's limit when that is configured lower.
	MaxEventsPerMessage int
	// CloseTimeout bounds how long Close waits for the sidecar to
	// acknowledge the end of the stream. Default DefaultCloseTimeout (2s).
	CloseTimeout time.Duration
	// Link, when set, carries this Reporter's streams as instances on the
	// link's ReportLoadBatch stream, shared with the link's other
	// Reporters (a node agent's engines), instead of a ReportLoad stream
	// each; the report times then follow the link's grid, and
	// AckInterval is the link's. Default nil: a stream of its own.
	Link *BatchLink
	// Logger receives a warning when the stream fails, debug messages
	// for the retries of the same outage, and an info message when a new
	// stream is acknowledged again. Default slog.Default().
	Logger *slog.Logger
}

// ReporterStats is a Reporter's activity so far.
type ReporterStats struct {
	// Connected is true while a stream is open and has been acknowledged.
	Connected bool
	// Streams counts the streams opened, reconnects included.
	Streams uint64
	// Reports counts the messages sent; Acks the acknowledgements received.
	Reports, Acks uint64
	// Events counts the block events sent, snapshots included.
	Events uint64
	// Resends counts whole-cache reports sent because the sidecar asked
	// (resend_cache). Only routers that still run the removed
	// --nats-catch-up resend mode ask; the Reporter keeps honouring them
	// during an upgrade.
	Resends uint64
	// Interval is the report interval in force.
	Interval time.Duration
	// Reconnects counts the times the stream was lost and acknowledged
	// again; LastReconnect describes the latest.
	Reconnects    uint64
	LastReconnect ReconnectStats
	// LastError is the error that ended the latest failed stream, or nil.
	LastError error
}

// Reporter keeps an instance's ReportLoad stream to the sidecar open: it
// reports the instance's load every interval, sends its KV-cache events with
// the next report, and reconnects after errors and sidecar restarts, opening
// each new stream with a snapshot of the cache. Every method is safe for
// concurrent use.
type Reporter struct {
	rpc  pb.LoadServiceClient
	opts ReporterOptions
	log  *slog.Logger

	mu      sync.Mutex
	book    *cacheBook
	stats   ReporterStats
	failing bool        // the latest stream failed and none was acked since
	out     outage      // while failing: since when, and the streams opened
	watch   connWatcher // the connection, to retry once it is back; nil if not a *grpc.ClientConn

	seq      atomic.Uint64
	interval atomic.Int64 // time.Duration
	resend   atomic.Bool  // the sidecar asked for the whole cache (resend_cache)

	flush     chan struct{} // Flush's wake-up, capacity 1
	closing   chan struct{}
	closeOnce sync.Once
	done      chan struct{}
}

// NewReporter validates opts and starts reporting over cc in a goroutine of
// its own, until Close. cc is normally a connection from Dial (whose short
// reconnect backoff matters here); the Reporter does not own it.
func NewReporter(cc grpc.ClientConnInterface, opts ReporterOptions) (*Reporter, error) {
	switch {
	case opts.Pool == "" || opts.Deployment == "" || opts.InstanceID == "" || opts.Address == "":
		return nil, errors.New("client: ReporterOptions needs Pool, Deployment, InstanceID and Address")
	case opts.Load == nil:
		return nil, errors.New("client: ReporterOptions.Load is nil; give a function returning the instance's load")
	case opts.MaxEventsPerMessage < 0:
		return nil, errors.New("client: ReporterOptions.MaxEventsPerMessage is negative")
	case opts.AckInterval > MaxAckInterval:
		return nil, fmt.Errorf("client: ReporterOptions.AckInterval %v is above the sidecar's limit %v", opts.AckInterval, MaxAckInterval)
	}
	def := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&opts.Interval, DefaultReportInterval)
	def(&opts.MinBackoff, DefaultMinBackoff)
	def(&opts.MaxBackoff, DefaultMaxBackoff)
	def(&opts.CloseTimeout, DefaultCloseTimeout)
	def(&opts.FlushGap, DefaultFlushGap)
	if opts.AckInterval == 0 {
		opts.AckInterval = DefaultAckInterval
	}
	opts.MaxBackoff = max(opts.MaxBackoff, opts.MinBackoff)
	if opts.MaxEventsPerMessage == 0 {
		opts.MaxEventsPerMessage = MaxEventsPerMessage
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	r := &Reporter{
		rpc: pb.NewLoadServiceClient(cc), opts: opts,
		log:     opts.Logger.With("pool", opts.Pool, "deployment", opts.Deployment, "instance", opts.InstanceID),
		book:    newCacheBook(opts.Snapshot == nil),
		closing: make(chan struct{}), done: make(chan struct{}), flush: make(chan struct{}, 1),
	}
	r.watch, _ = cc.(connWatcher)
	r.interval.Store(int64(opts.Interval))
	go r.run()
	return r, nil
}

// Stored records that the instance's KV cache now holds the blocks with
// these hashes (prefixhash token-mode hashes, see prefixhash's README). The
// events go out with the next report. No-op without CacheEvents.
func (r *Reporter) Stored(hashes ...uint64) { r.events(hashes, true) }

// Removed records that the instance evicted the blocks with these hashes.
// No-op without CacheEvents.
func (r *Reporter) Removed(hashes ...uint64) { r.events(hashes, false) }

// Cleared records that the instance dropped its whole KV cache: the next
// report clears the sidecar's index of the instance before any later
// Stored. No-op without CacheEvents.
func (r *Reporter) Cleared() {
	if !r.opts.CacheEvents {
		return
	}
	r.mu.Lock()
	r.book.clear()
	r.mu.Unlock()
}

func (r *Reporter) events(hashes []uint64, stored bool) {
	if !r.opts.CacheEvents || len(hashes) == 0 {
		return
	}
	r.mu.Lock()
	for _, h := range hashes {
		r.book.event(h, stored)
	}
	r.mu.Unlock()
}

// Flush asks for the queued events to go out now instead of with the next
// periodic report: at once while the early-report budget lasts (see
// FlushGap), else FlushGap after the latest report. It never blocks. An agent that translates
// an engine's events calls it after each batch, so that the router sees a
// stored block within milliseconds.
func (r *Reporter) Flush() {
	select {
	case r.flush <- struct{}{}:
	default:
	}
}

// Stats returns the Reporter's activity so far.
func (r *Reporter) Stats() ReporterStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.stats
	s.Interval = time.Duration(r.interval.Load())
	return s
}

// Close ends the stream cleanly (the sidecar marks the instance
// disconnected and forgets it after the pool's forget_after), waiting at
// most CloseTimeout for the sidecar, and stops the Reporter. Queued events
// not yet sent are dropped. Close is idempotent and always returns nil; it
// must not be called from the Load or Snapshot callbacks.
func (r *Reporter) Close() error {
	r.closeOnce.Do(func() { close(r.closing) })
	<-r.done
	return nil
}
