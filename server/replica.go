package server

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/internal/cluster"
	"github.com/prefixroute/prefixroute/internal/state"
)

// replica joins a Server to the other replicas of the cluster through a
// cluster.Link: it publishes what this replica sees (reports, stream ends,
// picks), applies what the others publish, keeps the pools' configuration
// in the link's bucket, and answers and asks for snapshots. Safe for
// concurrent use.
//
// Fail-static: while NATS is unreachable, routing goes on with the last
// view and this replica's own reports; configuration changes fail with
// Unavailable instead of diverging. When the link is back, the bucket's
// watch delivers the changes missed and a snapshot from a peer brings the
// instances up to date.
type replica struct {
	s   *Server
	cfg cluster.Config

	link atomic.Pointer[cluster.Link] // nil until the first Dial succeeds

	// revs is, per pool, the bucket revision of the configuration in
	// force here (written here or mirrored from the watch). Guarded by
	// Server.adminMu.
	revs map[string]uint64

	mu     sync.Mutex
	remote map[instKey]*state.Session // instances reporting to other replicas
	local  map[instKey]int            // open streams on this replica

	// applyMu serializes applying other replicas' events with importing a
	// snapshot. While a snapshot is being pulled, the events of remote
	// instances are also recorded (raw payloads, in arrival order), so
	// that those the snapshot predates are applied again on top of it
	// instead of being undone by it (pullSnapshot). recording is nil when
	// nothing is recorded; guarded by recMu, written under applyMu too
	// when it ends.
	applyMu   sync.Mutex
	recMu     sync.Mutex
	recording map[instKey][][]byte
	// expect holds, for instances imported from the latest snapshot and
	// not heard of since, the sequence number of the report the snapshot
	// had; a first event numbered beyond the next one reveals events the
	// snapshot's peer had not applied yet when it answered, which this
	// replica never received (published before it subscribed): the
	// snapshot is then asked for again, at most maxGapPulls times per
	// catch-up. Guarded by applyMu.
	expect   map[instKey]uint64
	gapPulls atomic.Int32
	// pullRetries counts the failed snapshot requests of this catch-up
	// (retrySnapshot).
	pullRetries atomic.Int32

	resync   chan struct{} // a snapshot is wanted (after a reconnect)
	stop     chan struct{}
	stopOnce sync.Once
	wg       sync.WaitGroup
	applied  atomic.Uint64 // events applied from other replicas

	// resendEpoch counts the resend requests of joining replicas; each
	// report stream here passes a new one on in its next ack.
	resendEpoch atomic.Uint64
	catchUp     string // CatchUpSnapshot or CatchUpResend
}

// How a replica that joins, or comes back after losing NATS, catches up on
// the instances reporting to the others (Options.ClusterCatchUp).
const (
	// CatchUpSnapshot asks one peer for its whole view (default).
	CatchUpSnapshot = "snapshot"
	// CatchUpResend asks every peer to have its instances resend their
	// caches through the LoadAck (resend_cache), fanned out as reports.
	CatchUpResend = "resend"
)

type instKey struct{ pool, instance string }

// configKeyPrefix starts every pool's key in the bucket: "pool." and the
// pool name as cluster.EncodeToken makes it.
const configKeyPrefix = "pool."

func configKey(pool string) string { return configKeyPrefix + cluster.EncodeToken(pool) }

// allPools is the snapshot request for every pool (pool names are never
// empty).
const allPools = ""

func newReplica(s *Server, cfg cluster.Config, catchUp string) *replica {
	if catchUp == "" {
		catchUp = CatchUpSnapshot
	}
	return &replica{s: s, cfg: cfg, revs: make(map[string]uint64), expect: make(map[instKey]uint64),
		remote: make(map[instKey]*state.Session), local: make(map[instKey]int),
		resync: make(chan struct{}, 1), stop: make(chan struct{}), catchUp: catchUp}
}

// start dials NATS, waiting up to the link's ApplyTimeout. If NATS cannot
// be reached the replica serves from the local copy of the configuration
// and keeps dialling in the background, every ReconnectWait.
func (r *replica) start() {
	ctx, cancel := context.WithTimeout(context.Background(), r.cfg.ApplyTimeout)
	err := r.dial(ctx)
	cancel()
	r.wg.Add(1)
	go r.loop(err != nil)
	if err != nil {
		r.s.log.Warn("NATS unreachable at start: routing on the local copy of the configuration, changes refused until it is back",
			"nats", r.cfg.URLs, "error", err)
	}
}

func (r *replica) dial(ctx context.Context) error {
	r.beginRecording() // events flow from Dial on; the snapshot comes later
	r.gapPulls.Store(0)
	r.pullRetries.Store(0)
	l, err := cluster.Dial(ctx, r.cfg, cluster.Handlers{
		OnConfig: r.onConfig,
		OnEvents: r.onEvents,
		OnState:  r.onState,
		OnError:  func(err error) { r.s.log.Warn("cluster link", "error", err) },
	})
	if err != nil {
		return err
	}
	if err := l.ServeSnapshots(r.snapshot); err != nil {
		l.Close()
		return err
	}
	r.link.Store(l)
	r.s.log.Info("cluster link up", "nats", r.cfg.URLs, "replica", l.Name(), "bucket", r.cfg.Bucket)
	r.wantSnapshot()
	return nil
}

// loop dials until it succeeds (when the first Dial failed), then asks a
// peer for a snapshot whenever one is wanted, until stop.
func (r *replica) loop(dialing bool) {
	defer r.wg.Done()
	t := time.NewTicker(max(r.cfg.ReconnectWait, 100*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
			if dialing {
				ctx, cancel := context.WithTimeout(context.Background(), r.cfg.ApplyTimeout)
				dialing = r.dial(ctx) != nil
				cancel()
			}
		case <-r.resync:
			if r.catchUp == CatchUpResend {
				r.publish(allPools, &pb.ClusterEvent{Event: &pb.ClusterEvent_Resend{Resend: &pb.ResendRequest{}}})
			} else {
				r.pullSnapshot()
			}
		}
	}
}

func (r *replica) wantSnapshot() {
	select {
	case r.resync <- struct{}{}:
	default:
	}
}

func (r *replica) onState(st cluster.State) {
	switch st {
	case cluster.StateConnected:
		r.s.log.Info("cluster link reconnected: catching up on configuration and instances")
		r.beginRecording()
		r.gapPulls.Store(0)
		r.pullRetries.Store(0)
		r.wantSnapshot()
	case cluster.StateDisconnected:
		r.s.log.Warn("cluster link down: routing on the last view and local reports; configuration changes answer Unavailable")
	}
}

// close stops the background work and the link.
func (r *replica) close() {
	r.stopOnce.Do(func() { close(r.stop) })
	r.wg.Wait()
	if l := r.link.Load(); l != nil {
		l.Close()
	}
}

// publish sends one event on pool's subject. It never blocks; while NATS
// is down the link drops (and counts) the oldest.
func (r *replica) publish(pool string, ev *pb.ClusterEvent) {
	l := r.link.Load()
	if l == nil {
		return
	}
	data, err := proto.Marshal(ev)
	if err == nil {
		err = l.Publish(pool, data)
	}
	if err != nil && !errors.Is(err, cluster.ErrClosed) {
		r.s.log.Warn("cluster event not published", "pool", pool, "error", err)
	}
}

// streamOpened and streamEnded track this replica's own report streams:
// an instance reporting here is never driven by another replica's events.
func (r *replica) streamOpened(pool, instance string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := instKey{pool, instance}
	r.local[k]++
	delete(r.remote, k) // Connect replaces that session
}

// streamEnded undoes streamOpened; with closed, the stream had a session,
// and when it was the instance's last stream here the others learn that it
// disconnected.
func (r *replica) streamEnded(pool, instance string, closed bool) {
	r.mu.Lock()
	k := instKey{pool, instance}
	r.local[k]--
	last := r.local[k] <= 0
	if last {
		delete(r.local, k)
	}
	r.mu.Unlock()
	if last && closed { // a stream replaced by a newer one here is no disconnect
		r.publish(pool, &pb.ClusterEvent{Event: &pb.ClusterEvent_Closed{Closed: &pb.InstanceClosed{InstanceId: instance}}})
	}
}

// reported publishes a report applied from one of this replica's streams,
// with its identity filled in (later reports of a stream may leave it out).
func (r *replica) reported(id state.Identity, m *pb.ReportLoadRequest) {
	m.Pool, m.Deployment, m.InstanceId, m.Address = id.Pool, id.Deployment, id.Instance, id.Address
	r.publish(id.Pool, &pb.ClusterEvent{Event: &pb.ClusterEvent_Report{Report: m}})
}

// picked publishes a pick's assigned work.
func (r *replica) picked(pool string, out *state.Pick, hashes []uint64) {
	d := &out.Decision
	ev := &pb.PickAssigned{InstanceId: out.Snapshot.Instances[d.Instance].ID,
		PrefillTokens: uint64(d.Instances[d.Instance].UncachedTokens)}
	if out.Approximate {
		ev.BlockHashes = hashes
	}
	r.publish(pool, &pb.ClusterEvent{Event: &pb.ClusterEvent_Assigned{Assigned: ev}})
}
