package replica

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/internal/cluster"
	"github.com/prefixroute/prefixroute/internal/state"
	"github.com/prefixroute/prefixroute/internal/store"
)

// Host is what a Replica needs of the server whose state it replicates.
// Its methods must be safe for concurrent use.
type Host interface {
	// Locked runs fn with the host's configuration lock held and returns
	// fn's error. The host holds that lock while it prepares a change from
	// its copy of a pool's configuration, makes it (Replica.Change) and
	// puts the result in force; the replica puts a configuration another
	// replica wrote in force within Locked, so the two never interleave.
	Locked(fn func() error) error
	// Registry is the live state: other replicas' reports and picks are
	// applied to its pools.
	Registry() *state.Registry
	// Store is the local data dir, where the bucket's configuration is
	// kept for a restart without NATS.
	Store() *store.Store
	// Install puts pc in force as pool's configuration in the live state.
	// The replica calls it with the host's lock held.
	Install(pool string, pc store.PoolConfig) error
}

// Options configures a Replica. Zero fields take the defaults stated.
type Options struct {
	// Cluster is the link's configuration (cluster.Config.Validate);
	// its zero fields take cluster's defaults.
	Cluster cluster.Config
	// Logger receives operational logs. Default slog.Default().
	Logger *slog.Logger
	// Now is the clock of the live state. Default time.Now.
	Now func() time.Time
	// Freed, when set, is called with a pool's name after a batch of
	// another replica's events for it that held a load report or outcomes
	// is applied, outside the replica's locks: capacity may have freed
	// (the host wakes the pool's waiting picks). It must not block.
	Freed func(pool string)
}

// Replica joins a Host to the other replicas of the cluster through a
// cluster.Link. Safe for concurrent use.
type Replica struct {
	h     Host
	cfg   cluster.Config
	log   *slog.Logger
	now   func() time.Time
	freed func(pool string) // Options.Freed, or nil

	link atomic.Pointer[cluster.Link] // nil until the first Dial succeeds

	cfgMu sync.Mutex        // taken after the host's lock, never before
	revs  map[string]uint64 // per pool, the bucket revision in force here; guarded by cfgMu

	mu     sync.Mutex                 // guards remote and local
	remote map[instKey]*state.Session // instances reporting to other replicas
	local  map[instKey]int            // open streams on this replica

	cu      catchUpState  // the snapshot catch-up (catchup.go)
	applied atomic.Uint64 // events applied from other replicas

	resync chan struct{}  // a catch-up is wanted (capacity 1)
	closed chan struct{}  // closed by Close
	once   sync.Once      // closes closed
	wg     sync.WaitGroup // the background loop
}

type instKey struct{ pool, instance string }

// allPools is the snapshot request, and the events subject, for every
// pool (pool names are never empty).
const allPools = ""

// New returns a Replica of h, not yet connected (Start). It refuses an
// invalid cluster configuration.
func New(h Host, opts Options) (*Replica, error) {
	if err := opts.Cluster.Validate(); err != nil {
		return nil, err
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	r := &Replica{h: h, cfg: opts.Cluster.WithDefaults(), log: opts.Logger, now: opts.Now, freed: opts.Freed,
		revs: make(map[string]uint64), remote: make(map[instKey]*state.Session), local: make(map[instKey]int),
		closed: make(chan struct{}), resync: make(chan struct{}, 1)}
	r.cu.expect = make(map[instKey]uint64)
	return r, nil
}

// Start dials NATS, waiting up to the link's ApplyTimeout. If NATS cannot
// be reached the replica serves from the local copy of the configuration
// and keeps dialling in the background, every ReconnectWait. Call it once.
func (r *Replica) Start() {
	ctx, cancel := context.WithTimeout(context.Background(), r.cfg.ApplyTimeout)
	err := r.dial(ctx)
	cancel()
	r.wg.Add(1)
	go r.loop(err != nil)
	if err != nil {
		r.log.Warn("NATS unreachable at start: routing on the local copy of the configuration, changes refused until it is back",
			"nats", r.cfg.URLs, "error", err)
	}
}

func (r *Replica) dial(ctx context.Context) error {
	r.beginCatchUp() // events flow from Dial on; the snapshot comes later
	l, err := cluster.Dial(ctx, r.cfg, cluster.Handlers{
		OnConfig: r.onConfig,
		OnEvents: r.onEvents,
		OnState:  r.onState,
		OnError:  func(err error) { r.log.Warn("cluster link", "error", err) },
	})
	if err != nil {
		return err
	}
	if err := l.ServeSnapshots(r.snapshot); err != nil {
		l.Close()
		return err
	}
	r.link.Store(l)
	r.log.Info("cluster link up", "nats", r.cfg.URLs, "replica", l.Name(), "bucket", r.cfg.Bucket)
	r.wantCatchUp()
	return nil
}

// loop dials until it succeeds (when the first Dial failed), then catches
// up whenever that is wanted, until Close.
func (r *Replica) loop(dialing bool) {
	defer r.wg.Done()
	t := time.NewTicker(max(r.cfg.ReconnectWait, 100*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-r.closed:
			return
		case <-t.C:
			if dialing {
				ctx, cancel := context.WithTimeout(context.Background(), r.cfg.ApplyTimeout)
				dialing = r.dial(ctx) != nil
				cancel()
			}
		case <-r.resync:
			r.pullSnapshot()
		}
	}
}

// wantCatchUp asks the loop to catch up (once, however often it is asked
// before the loop gets to it).
func (r *Replica) wantCatchUp() {
	select {
	case r.resync <- struct{}{}:
	default:
	}
}

func (r *Replica) onState(st cluster.State) {
	switch st {
	case cluster.StateConnected:
		r.log.Info("cluster link reconnected: catching up on configuration and instances")
		r.beginCatchUp()
		r.wantCatchUp()
	case cluster.StateDisconnected:
		r.log.Warn("cluster link down: routing on the last view and local reports; configuration changes answer Unavailable")
	}
}

// Close stops the background work and the link. Safe to call more than
// once.
func (r *Replica) Close() {
	r.once.Do(func() { close(r.closed) })
	r.wg.Wait()
	if l := r.link.Load(); l != nil {
		l.Close()
	}
}

// publish sends one event on pool's subject. It never blocks; while NATS
// is down the link drops (and counts) the oldest.
func (r *Replica) publish(pool string, ev *pb.ClusterEvent) {
	l := r.link.Load()
	if l == nil {
		return
	}
	data, err := proto.Marshal(ev)
	if err == nil {
		err = l.Publish(pool, data)
	}
	if err != nil && !errors.Is(err, cluster.ErrClosed) {
		r.log.Warn("cluster event not published", "pool", pool, "error", err)
	}
}

// StreamOpened records that instance of pool opened a report stream on
// this replica. Called before the instance's session is connected: from
// then on, other replicas' events for the instance no longer drive it, so
// none can replace the new session.
func (r *Replica) StreamOpened(pool, instance string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := instKey{pool, instance}
	r.local[k]++
	delete(r.remote, k) // Connect replaces that session
}

// StreamEnded undoes StreamOpened; with closed, the stream had a session,
// and when it was the instance's last stream here the others learn that it
// disconnected.
func (r *Replica) StreamEnded(pool, instance string, closed bool) {
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

// Reported publishes a report applied from one of this replica's streams,
// with its identity filled in (later reports of a stream may leave it
// out): m is modified.
func (r *Replica) Reported(id state.Identity, m *pb.ReportLoadRequest) {
	m.Pool, m.Deployment, m.InstanceId, m.Address = id.Pool, id.Deployment, id.Instance, id.Address
	r.publish(id.Pool, &pb.ClusterEvent{Event: &pb.ClusterEvent_Report{Report: m}})
}

// Picked publishes the work a pick of pool gave its instance; hashes are
// the request's block hashes, sent only when the decision was approximate
// (the instance reports no cache events).
func (r *Replica) Picked(pool string, out *state.Pick, hashes []uint64) {
	d := &out.Decision
	tokens, ptokens := out.Work()
	ev := &pb.PickAssigned{InstanceId: out.Snapshot.Instances[d.Instance].ID, PrefillTokens: tokens, KvBlocks: out.KVBlocks()}
	if out.Approximate {
		ev.BlockHashes = hashes
	}
	r.publish(pool, &pb.ClusterEvent{Event: &pb.ClusterEvent_Assigned{Assigned: ev}})
	if pre := d.PD.Prefill; d.PD.Disaggregated() { // a disaggregated pick: the prefill instance's work too
		ev := &pb.PickAssigned{InstanceId: out.Snapshot.Instances[pre].ID, PrefillTokens: ptokens}
		if out.ApproximatePrefill {
			ev.BlockHashes = hashes
		}
		r.publish(pool, &pb.ClusterEvent{Event: &pb.ClusterEvent_Assigned{Assigned: ev}})
	}
}

// Outcomes publishes the outcomes of a ReportOutcome call of pool that bear
// on reachability, so that every replica excludes an instance a gateway
// could not connect to: every failed connect (each one restarts the
// back-off), and the served outcomes when they brought an excluded
// instance back here (res.Restored). Served outcomes of reachable
// instances, the common case, publish nothing and allocate nothing.
func (r *Replica) Outcomes(pool string, outs []state.Outcome, res state.OutcomeResult) {
	var ev *pb.InstanceOutcomes
	for i := range outs {
		o := &outs[i]
		if o.Kind != state.OutcomeConnectFailed && (o.Kind != state.OutcomeServed || res.Restored == 0) {
			continue
		}
		if ev == nil {
			ev = &pb.InstanceOutcomes{}
		}
		if o.Kind == state.OutcomeConnectFailed {
			ev.ConnectFailed = append(ev.ConnectFailed, o.Instance)
		} else {
			ev.Served = append(ev.Served, o.Instance)
		}
	}
	if ev != nil {
		r.publish(pool, &pb.ClusterEvent{Event: &pb.ClusterEvent_Outcomes{Outcomes: ev}})
	}
}
