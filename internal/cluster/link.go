package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Handlers are the Link's callbacks. Every field is optional. Each kind
// of callback is called from one goroutine at a time (never concurrently
// with itself), in the order described on the field; different kinds may
// run concurrently. Handlers must not block for long and must not call
// Link.Close. No handler is running or called once Close returns.
type Handlers struct {
	// OnConfig is called for every change of every key in the bucket, in
	// revision order (revisions are bucket-wide, so per key too). At Dial
	// it first receives the current value of every key (a key whose latest
	// revision is a delete marker arrives with deleted=true); Dial returns
	// only after that initial sync. After a reconnect it receives every
	// revision written while the link was away, oldest first, still
	// within the bucket's History. value must not be modified but may be
	// retained.
	OnConfig func(key string, value []byte, revision uint64, deleted bool)

	// OnEvents is called once per received batch from another replica, in
	// the order that replica sent them. payloads is reused after the call
	// returns; each payloads[i] may be retained (it is not reused).
	// Events are not persisted: what other replicas sent while this link
	// was disconnected is lost, so after OnState(StateConnected) follows
	// a disconnect, resync with RequestSnapshot.
	OnEvents func(pool, origin string, sentAt time.Time, payloads [][]byte)

	// OnState is called on every change of Link.State.
	OnState func(State)

	// OnError receives asynchronous problems that no call returns: slow
	// consumer drops, malformed batches, watch restarts that failed.
	OnError func(error)
}

// State is the link's connection state.
type State int32

// Link states.
const (
	StateConnected State = iota + 1
	StateDisconnected
	StateClosed
)

// String returns "connected", "disconnected" or "closed".
func (s State) String() string {
	switch s {
	case StateConnected:
		return "connected"
	case StateDisconnected:
		return "disconnected"
	case StateClosed:
		return "closed"
	}
	return fmt.Sprintf("State(%d)", int32(s))
}

// Link is one replica's connection to the cluster: the shared config KV,
// event fan-out and snapshot exchange. All methods are safe for
// concurrent use.
type Link struct {
	cfg Config
	h   Handlers
	nc  *nats.Conn
	js  jetstream.JetStream
	kv  jetstream.KeyValue
	str jetstream.Stream

	kvSubjPrefix string // "$KV.<bucket>."
	eventsPrefix string // "<prefix>.events."
	snapPrefix   string // "<prefix>.snapshot."
	maxMsg       int    // largest payload that fits one message with our headers

	ctx    context.Context // done at Close
	cancel context.CancelFunc
	closed atomic.Bool
	wg     sync.WaitGroup
	// cbMu is read-held around every handler call; Close write-locks it
	// to wait for the calls in flight.
	cbMu sync.RWMutex

	stateMu sync.Mutex
	state   atomic.Int32

	reconnected chan struct{} // wakes the watch loop after a reconnect
	wake        chan struct{} // wakes the event sender

	out     outbox
	sending atomic.Bool // the sender holds a popped batch
	recvBuf [][]byte    // reused by the events subscription goroutine
	evSub   *nats.Subscription

	snapMu  sync.Mutex
	snapSub *nats.Subscription
	snapSem chan struct{}

	st counters
}

// Dial connects to NATS, opens (or creates) the KV bucket, starts the
// config watch and, when h.OnEvents is set, subscribes to events of all
// pools. When OnConfig is set, Dial returns after OnConfig has seen every
// key's current value. ctx bounds the whole of Dial; each network step
// is also bounded by cfg.ApplyTimeout. A connection failure is
// ErrUnavailable; NATS must be reachable at Dial (afterwards the link
// reconnects by itself, forever, until Close).
func Dial(ctx context.Context, cfg Config, h Handlers) (*Link, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	l := &Link{
		cfg:          cfg,
		h:            h,
		kvSubjPrefix: "$KV." + cfg.Bucket + ".",
		eventsPrefix: cfg.SubjectPrefix + ".events.",
		snapPrefix:   cfg.SubjectPrefix + ".snapshot.",
		reconnected:  make(chan struct{}, 1),
		wake:         make(chan struct{}, 1),
		snapSem:      make(chan struct{}, 4),
	}
	l.ctx, l.cancel = context.WithCancel(context.Background())
	l.state.Store(int32(StateDisconnected))
	l.out.init(cfg.MaxBatchBytes, cfg.MaxPendingBytes, cfg.FlushInterval, l.sealed)
	if err := l.connect(ctx); err != nil {
		l.cancel()
		return nil, err
	}
	if err := l.setup(ctx); err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

func (l *Link) setup(ctx context.Context) error {
	var err error
	if l.js, err = jetstream.New(l.nc); err != nil {
		return fmt.Errorf("%w: jetstream: %w", ErrUnavailable, err)
	}
	if err := l.openBucket(ctx); err != nil {
		return err
	}
	l.wg.Add(1)
	go l.sendLoop()
	if l.h.OnEvents != nil {
		sub, err := l.nc.Subscribe(l.eventsPrefix+"*", l.onEventMsg)
		if err != nil {
			return fmt.Errorf("%w: subscribe events: %w", ErrUnavailable, err)
		}
		l.evSub = sub
	}
	if l.h.OnConfig != nil {
		if err := l.startWatch(ctx); err != nil {
			return err
		}
	}
	if err := l.nc.FlushTimeout(l.cfg.ApplyTimeout); err != nil { // subscriptions are live on return
		return fmt.Errorf("%w: flush: %w", ErrUnavailable, err)
	}
	return nil
}

func (l *Link) openBucket(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, l.cfg.ApplyTimeout)
	defer cancel()
	kv, err := l.js.KeyValue(ctx, l.cfg.Bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		kv, err = l.js.CreateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket:      l.cfg.Bucket,
			Description: "prefixroute shared configuration",
			History:     uint8(l.cfg.History),
			Replicas:    l.cfg.Replicas,
			Storage:     jetstream.FileStorage,
		})
		if errors.Is(err, jetstream.ErrBucketExists) || errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			kv, err = l.js.KeyValue(ctx, l.cfg.Bucket) // another replica won the race
		}
	}
	if err != nil {
		return fmt.Errorf("%w: open bucket %q: %w", ErrUnavailable, l.cfg.Bucket, err)
	}
	l.kv = kv
	if l.str, err = l.js.Stream(ctx, "KV_"+l.cfg.Bucket); err != nil {
		return fmt.Errorf("%w: open bucket stream %q: %w", ErrUnavailable, l.cfg.Bucket, err)
	}
	return nil
}

// Name returns the replica name in use (Config.Name or its default).
func (l *Link) Name() string { return l.cfg.Name }

// State returns the current connection state.
func (l *Link) State() State { return State(l.state.Load()) }

func (l *Link) setState(s State) {
	l.stateMu.Lock()
	defer l.stateMu.Unlock()
	// After Close starts only Close itself reports (StateClosed); nats.go
	// may still deliver its disconnect callback asynchronously.
	if (s != StateClosed && l.closed.Load()) || State(l.state.Load()) == StateClosed ||
		State(l.state.Swap(int32(s))) == s {
		return
	}
	if s == StateDisconnected {
		l.st.disconnects.Add(1)
	}
	if l.h.OnState != nil {
		l.h.OnState(s)
	}
}

// Close flushes buffered events (best effort, within ApplyTimeout; events
// buffered while disconnected are discarded), stops
// the watch and the subscriptions, and closes the connection. It waits
// for handler calls in flight, so it must not be called from a handler.
// Calling it again is a no-op.
func (l *Link) Close() {
	if l.closed.Swap(true) {
		return
	}
	if l.nc != nil && l.nc.IsConnected() {
		ctx, cancel := context.WithTimeout(context.Background(), l.cfg.ApplyTimeout)
		_ = l.flush(ctx)
		cancel()
	}
	l.cancel()
	l.out.stop()
	l.snapMu.Lock()
	if l.snapSub != nil {
		_ = l.snapSub.Unsubscribe()
	}
	l.snapMu.Unlock()
	if l.evSub != nil {
		_ = l.evSub.Unsubscribe()
	}
	// Wait for handler calls in flight; later ones see closed and return.
	// The empty critical section is the barrier: callback and the snapshot
	// responder read-hold cbMu for their whole run, so Lock returns only once
	// none is running, and closed is already set for any that starts later.
	l.cbMu.Lock()
	//lint:ignore SA2001 barrier for in-flight callbacks (see above)
	l.cbMu.Unlock()
	if l.nc != nil {
		l.nc.Close()
	}
	l.wg.Wait() // watch loop, sender, snapshot responders
	l.setState(StateClosed)
}

// callback runs f under cbMu unless the link is closed.
func (l *Link) callback(f func()) {
	l.cbMu.RLock()
	defer l.cbMu.RUnlock()
	if !l.closed.Load() {
		f()
	}
}

func (l *Link) asyncErr(err error) {
	if l.h.OnError != nil && err != nil {
		l.callback(func() { l.h.OnError(err) })
	}
}

// ready returns an error unless the link is open and connected.
func (l *Link) ready() error {
	if l.closed.Load() {
		return ErrClosed
	}
	if !l.nc.IsConnected() {
		return fmt.Errorf("%w: %s", ErrUnavailable, l.nc.Status())
	}
	return nil
}

// signal does a non-blocking send on a 1-buffered channel.
func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// sleepCtx waits d or until ctx is done; it reports whether d elapsed.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
