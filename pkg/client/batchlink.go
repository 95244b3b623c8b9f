package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
)

// BatchLink defaults.
const (
	// DefaultLinkDelay is how long a report waits at most for the reports
	// of the link's other instances.
	DefaultLinkDelay = 5 * time.Millisecond
	// MaxBatchReports is the most reports the sidecar takes in one
	// ReportLoadBatch message (server.MaxBatchReports); a BatchLink splits
	// what is queued into messages of at most this many.
	MaxBatchReports = 256
	// linkQueueMax bounds the reports queued on a link: a Reporter's send
	// waits while the stream is this far behind (flow control), as its own
	// ReportLoad stream's send would.
	linkQueueMax = 4 * MaxBatchReports
)

// BatchLinkOptions configures a BatchLink. Zero fields take the defaults
// stated.
type BatchLinkOptions struct {
	// MaxDelay bounds how long a report waits for the reports of the
	// link's other instances: a message goes out when every instance on
	// the link has a report in it, or MaxDelay after its first report.
	// Default DefaultLinkDelay (5ms).
	MaxDelay time.Duration
	// AckInterval is ReporterOptions.AckInterval for every instance on the
	// link (the stream's ack_interval_ms; a linked Reporter's own is not
	// used). Default DefaultAckInterval (1s); negative: every message
	// acked; at most MaxAckInterval.
	AckInterval time.Duration
}

// BatchLinkStats is a BatchLink's traffic so far.
type BatchLinkStats struct {
	// Streams counts the ReportLoadBatch streams opened.
	Streams uint64
	// Messages and Reports count the messages sent and the reports in them.
	Messages, Reports uint64
}

// BatchLink carries the report streams of several Reporters on one
// ReportLoadBatch stream: a node agent reporting for every engine of its
// host gives their Reporters one link (ReporterOptions.Link), and the
// sidecar receives one message per tick instead of one per instance, which
// is most of what a report costs it. Each Reporter keeps its semantics
// (identity on its first report, acks by seq, its own reconnects and
// snapshots), and the linked Reporters report on one grid of times, so
// their reports of a tick travel together. The stream opens with the first
// Reporter and closes after the last. Safe for concurrent use.
type BatchLink struct {
	rpc   pb.LoadServiceClient
	opts  BatchLinkOptions
	epoch time.Time // the report grid's origin

	mu    sync.Mutex
	cur   *linkStream // the stream new Reporters join; nil when none is open
	stats BatchLinkStats
}

// NewBatchLink returns a link over cc (normally a connection from Dial). It
// opens nothing until a Reporter uses it.
func NewBatchLink(cc grpc.ClientConnInterface, opts BatchLinkOptions) (*BatchLink, error) {
	if opts.AckInterval > MaxAckInterval {
		return nil, fmt.Errorf("client: BatchLinkOptions.AckInterval %v is above the sidecar's limit %v", opts.AckInterval, MaxAckInterval)
	}
	if opts.MaxDelay <= 0 {
		opts.MaxDelay = DefaultLinkDelay
	}
	if opts.AckInterval == 0 {
		opts.AckInterval = DefaultAckInterval
	}
	return &BatchLink{rpc: pb.NewLoadServiceClient(cc), opts: opts, epoch: time.Now()}, nil
}

// Stats returns the link's counts so far.
func (k *BatchLink) Stats() BatchLinkStats {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.stats
}

// next is the first time of the link's report grid (multiples of every
// from its epoch) after now.
func (k *BatchLink) next(now time.Time, every time.Duration) time.Time {
	n := now.Sub(k.epoch)/every + 1
	return k.epoch.Add(n * every)
}

// open puts instance pool/id on the link's stream, opening one when none
// is open, for as long as ctx lives.
func (k *BatchLink) open(ctx context.Context, pool, id string) (reportStream, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.cur != nil {
		s, err := k.cur.join(ctx, linkKey{pool, id})
		if !errors.Is(err, errLinkDraining) {
			return s, err
		}
	}
	sctx, cancel := context.WithCancel(context.Background())
	st, err := k.rpc.ReportLoadBatch(sctx)
	if err != nil {
		cancel()
		return nil, err
	}
	k.cur = newLinkStream(k, st, cancel)
	k.stats.Streams++
	return k.cur.join(ctx, linkKey{pool, id})
}

// count adds a sent message of n reports to the stats.
func (k *BatchLink) count(n int) {
	k.mu.Lock()
	k.stats.Messages++
	k.stats.Reports += uint64(n)
	k.mu.Unlock()
}

// leave forgets ls as the stream to join (its last instance left, or it
// failed).
func (k *BatchLink) leave(ls *linkStream) {
	k.mu.Lock()
	if k.cur == ls {
		k.cur = nil
	}
	k.mu.Unlock()
}

// reportStream is what a Reporter reports on: its own ReportLoad stream, or
// its instance on a BatchLink's stream.
type reportStream interface {
	Send(*pb.ReportLoadRequest) error
	Recv() (*pb.ReportLoadResponse, error)
	CloseSend() error
}

// linkKey names an instance on a link.
type linkKey struct{ pool, instance string }

// errLinkInstance is join's error for an instance already on the link.
var errLinkInstance = errors.New("client: the instance already reports on this BatchLink")

// errLinkDraining is join's error for a stream that is closing: open
// starts another.
var errLinkDraining = errors.New("client: the BatchLink's stream is closing")
