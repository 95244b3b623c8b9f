package cluster

import (
	"sync"
	"sync/atomic"
	"time"
)

// LagBuckets are the upper bounds of Stats.LagBuckets: batch lag
// (receive time minus the sender's HeaderSentAt) falls in the first
// bucket whose bound it does not exceed, or in the last (overflow)
// bucket. The lag includes clock skew between the two hosts; negative
// values count as 0.
var LagBuckets = [...]time.Duration{
	250 * time.Microsecond, 500 * time.Microsecond,
	time.Millisecond, 2 * time.Millisecond, 5 * time.Millisecond,
	10 * time.Millisecond, 25 * time.Millisecond, 50 * time.Millisecond,
	100 * time.Millisecond, 250 * time.Millisecond, 500 * time.Millisecond,
	time.Second, 5 * time.Second,
}

// lagEWMAWeight is the weight of the newest sample in Stats.LagEWMA.
const lagEWMAWeight = 0.05

// Stats is a point-in-time copy of a Link's counters. Counters only grow
// (they are totals since Dial); PendingBytes and the lag fields are
// gauges. Reading it is safe for concurrent use and cheap.
type Stats struct {
	// Outgoing events, counted when handed to NATS.
	PublishedEvents, PublishedBatches, PublishedBytes uint64
	// Outgoing events dropped because the outbox was full (NATS down or
	// too slow): always whole batches, oldest first.
	DroppedEvents, DroppedBatches, DroppedBytes uint64
	// PendingBytes is the framed event data waiting in the outbox (open
	// and sealed batches).
	PendingBytes int

	// Incoming events from other replicas, counted before OnEvents.
	ReceivedEvents, ReceivedBatches, ReceivedBytes uint64
	// SelfDropped counts batches carrying our own Name (not applied).
	SelfDropped uint64
	// Malformed counts incoming batches that could not be decoded.
	Malformed uint64
	// SlowConsumer counts slow-consumer reports from the NATS client
	// (messages it dropped because a handler was too slow);
	// ReceiveDropped is the number of messages dropped that way.
	SlowConsumer, ReceiveDropped uint64

	// LagLast is the lag of the latest received batch, LagEWMA an
	// exponentially weighted mean (weight 0.05 per batch), LagMax the
	// largest seen. LagBuckets counts batches per LagBuckets bound (not
	// cumulative); the extra last element counts the rest. LagCount and
	// LagSum are the number and sum of samples.
	LagLast, LagEWMA, LagMax time.Duration
	LagBuckets               [len(LagBuckets) + 1]uint64
	LagCount                 uint64
	LagSum                   time.Duration

	// ConfigUpdates counts OnConfig calls; WatchRestarts counts watchers
	// re-created after a reconnect or an interrupted watch.
	ConfigUpdates, WatchRestarts uint64
	// SnapshotsServed counts snapshot streams this replica completed;
	// SnapshotsRequested counts RequestSnapshot calls.
	SnapshotsServed, SnapshotsRequested uint64

	// Reconnects and Disconnects count connection changes since Dial.
	Reconnects, Disconnects uint64
	State                   State
}

type counters struct {
	pubEvents, pubBatches, pubBytes      atomic.Uint64
	recvEvents, recvBatches, recvBytes   atomic.Uint64
	selfDropped, malformed, slowConsumer atomic.Uint64
	configUpdates, watchRestarts         atomic.Uint64
	snapServed, snapRequested            atomic.Uint64
	reconnects, disconnects              atomic.Uint64
	lag                                  lagStats
}

type lagStats struct {
	mu        sync.Mutex
	last, max time.Duration
	ewma      float64
	buckets   [len(LagBuckets) + 1]uint64
	count     uint64
	sum       time.Duration
}

func (s *lagStats) observe(d time.Duration) {
	d = max(d, 0)
	i := 0
	for i < len(LagBuckets) && d > LagBuckets[i] {
		i++
	}
	s.mu.Lock()
	s.last = d
	s.max = max(s.max, d)
	if s.count == 0 {
		s.ewma = float64(d)
	} else {
		s.ewma += lagEWMAWeight * (float64(d) - s.ewma)
	}
	s.buckets[i]++
	s.count++
	s.sum += d
	s.mu.Unlock()
}

// Stats returns a snapshot of the link's counters.
func (l *Link) Stats() Stats {
	c := &l.st
	open, sealed := l.out.pending()
	l.out.mu.Lock()
	db, de, dby := l.out.droppedBatches, l.out.droppedEvents, l.out.droppedBytes
	l.out.mu.Unlock()
	s := Stats{
		PublishedEvents: c.pubEvents.Load(), PublishedBatches: c.pubBatches.Load(), PublishedBytes: c.pubBytes.Load(),
		DroppedEvents: de, DroppedBatches: db, DroppedBytes: dby,
		PendingBytes:   open + sealed,
		ReceivedEvents: c.recvEvents.Load(), ReceivedBatches: c.recvBatches.Load(), ReceivedBytes: c.recvBytes.Load(),
		SelfDropped: c.selfDropped.Load(), Malformed: c.malformed.Load(), SlowConsumer: c.slowConsumer.Load(),
		ConfigUpdates: c.configUpdates.Load(), WatchRestarts: c.watchRestarts.Load(),
		SnapshotsServed: c.snapServed.Load(), SnapshotsRequested: c.snapRequested.Load(),
		Reconnects: c.reconnects.Load(), Disconnects: c.disconnects.Load(),
		State: l.State(),
	}
	if l.evSub != nil {
		if n, err := l.evSub.Dropped(); err == nil {
			s.ReceiveDropped = uint64(n)
		}
	}
	c.lag.mu.Lock()
	s.LagLast, s.LagMax, s.LagEWMA = c.lag.last, c.lag.max, time.Duration(c.lag.ewma)
	s.LagBuckets, s.LagCount, s.LagSum = c.lag.buckets, c.lag.count, c.lag.sum
	c.lag.mu.Unlock()
	return s
}
