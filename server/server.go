package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"google.golang.org/grpc"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/internal/calib"
	"github.com/prefixroute/prefixroute/internal/cluster"
	"github.com/prefixroute/prefixroute/internal/flowq"
	"github.com/prefixroute/prefixroute/internal/pickbook"
	"github.com/prefixroute/prefixroute/internal/readiness"
	"github.com/prefixroute/prefixroute/internal/report"
	"github.com/prefixroute/prefixroute/internal/state"
	"github.com/prefixroute/prefixroute/internal/store"
)

// Options configures a Server. Zero fields take the defaults stated.
type Options struct {
	// DataDir holds the durable weights, policies and the audit log.
	// Required.
	DataDir string
	// Limits bounds what clients can make the router hold; see state.Limits.
	Limits state.Limits
	// Migration configures each pool's migration-readiness tracker (the
	// window of picks GetMigrationStatus reads, --migration-window); the
	// zero value takes the defaults of readiness.Config.
	Migration readiness.Config
	// Logger receives operational logs. Default slog.Default().
	Logger *slog.Logger
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// ReportInterval is the report interval the router asks instances for in
	// every ack. Default 100ms.
	ReportInterval time.Duration
	// SweepInterval is how often disconnected instances are checked against
	// forget_after. Default 1s.
	SweepInterval time.Duration
	// RampTick is how often running ramps are checked for a due step: a
	// step is applied at most RampTick after its time. Default 250ms.
	RampTick time.Duration
	// Cluster, when set, joins the other replicas through NATS (--nats):
	// configuration in its bucket, reports and picks fanned out. nil is a
	// single process on its data dir.
	Cluster *cluster.Config
}

// Server implements PickService, LoadService and AdminService over one
// state.Registry and one store.Store. Safe for concurrent use.
type Server struct {
	opts  Options
	log   *slog.Logger
	reg   *state.Registry
	store *store.Store

	adminMu  sync.Mutex // orders store writes with their publication to the pools
	stopping chan struct{}
	stopOnce sync.Once
	picks    sync.Pool      // of *pickScratch
	obs      *observer      // observability hooks (metrics.go); nil records nothing
	repl     Replicator     // the cluster, or standalone (replica.go)
	reports  *report.Engine // the report streams (load.go)
	book     *pickbook.Book // recent picks by request_id, for outcomes (internal/pickbook)
	fits     *calib.Book    // the deployments' prefill fits, fed by matched outcomes (outcome_calib.go)
	outcomes *outcomeObs    // the outcome metrics (outcome_metrics.go); nil records nothing
	flow     *flowq.Rooms   // the waiting picks of on_saturation: queue (flow.go)
}

// New opens the data dir, restores every configured pool and returns a
// Server ready to Register. A corrupt state file is an error naming it.
func New(opts Options) (*Server, error) {
	if opts.DataDir == "" {
		return nil, fmt.Errorf("server: a data dir is required")
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.ReportInterval <= 0 {
		opts.ReportInterval = 100 * time.Millisecond
	}
	if opts.SweepInterval <= 0 {
		opts.SweepInterval = time.Second
	}
	if opts.RampTick <= 0 {
		opts.RampTick = 250 * time.Millisecond
	}
	if err := opts.Migration.Validate(); err != nil {
		return nil, fmt.Errorf("server: migration tracker (--migration-window): %w", err)
	}
	st, err := store.Open(opts.DataDir, store.Options{Now: opts.Now})
	if err != nil {
		return nil, err
	}
	s := &Server{opts: opts, log: opts.Logger, reg: state.NewRegistry(opts.Limits, state.WithMigration(opts.Migration)), store: st, stopping: make(chan struct{})}
	s.picks.New = func() any { return newPickScratch() }
	s.book, s.fits = pickbook.New(), calib.NewBook()
	s.flow = flowq.NewRooms(nil)
	for name, pc := range st.Pools() {
		p, err := s.reg.Ensure(name)
		if err != nil {
			return nil, errors.Join(fmt.Errorf("server: restoring pool %q: %w", name, err), st.Close())
		}
		p.SetConfig(configOf(pc))
	}
	if s.repl, err = newReplicator(s, opts); err != nil {
		return nil, errors.Join(fmt.Errorf("server: %w", err), st.Close())
	}
	s.reports = newReports(s)
	return s, nil
}

// StartCluster joins the cluster when Options.Cluster is set: it waits up
// to the link's ApplyTimeout for NATS, then goes on in the background
// (fail-static). A no-op for a single process.
func (s *Server) StartCluster() { s.repl.Start() }

// Register adds the three services to gs.
func (s *Server) Register(gs grpc.ServiceRegistrar) {
	pb.RegisterPickServiceServer(gs, &pickService{s: s})
	pb.RegisterLoadServiceServer(gs, &loadService{s: s})
	pb.RegisterAdminServiceServer(gs, &adminService{s: s})
}

// Registry is the live state, for tools that drive it in-process.
func (s *Server) Registry() *state.Registry { return s.reg }

// Sweep forgets instances past forget_after every SweepInterval until ctx
// ends, then drops the pools left with no instance and no stored
// configuration for longer than forget_after (sweepOnce).
func (s *Server) Sweep(ctx context.Context) {
	every(ctx, s.opts.SweepInterval, s.sweepOnce)
}

// sweepOnce runs one sweep: it records the pools with instances in the
// seen set (noteSeen), forgets the instances past forget_after,
// then drops the pools a report created that have had neither instances nor
// a stored configuration (weights, policy, ramp) for forget_after, with
// their metric series and console history, so that they do not hold the
// --max-pools cap until a restart.
func (s *Server) sweepOnce() {
	now := s.opts.Now()
	s.flow.KickAll() // capacity heard of without a local report (other replicas)
	s.noteSeen()
	if n := s.reg.Sweep(now); n > 0 {
		s.log.Info("forgot instances disconnected past forget_after", "instances", n)
	}
	dropped := s.reg.DropIdle(now, func(pool string) bool {
		_, ok := s.store.Pool(pool)
		return ok
	})
	for _, name := range dropped {
		s.obs.dropPool(name)
		s.outcomes.dropPool(name)
		s.fits.DropPool(name)
	}
	if len(dropped) > 0 {
		s.log.Info("dropped pools with neither instances nor configuration past forget_after", "pools", len(dropped))
	}
}

// every calls fn every interval until ctx ends.
func every(ctx context.Context, interval time.Duration, fn func()) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			fn()
		}
	}
}

// Drain ends every report stream with Unavailable, so instances reconnect
// (to this router once it is back, or to another replica). Picks and admin
// calls keep working.
func (s *Server) Drain() { s.stopOnce.Do(func() { close(s.stopping) }) }

// Close leaves the cluster, records the pools with instances in the seen
// set (noteSeen) and releases the data dir.
func (s *Server) Close() error {
	s.repl.Close()
	s.noteSeen()
	return s.store.Close()
}

// configOf turns a stored pool configuration into the state's.
func configOf(pc store.PoolConfig) *state.Config {
	c := state.DefaultConfig()
	c.Weights = pc.Weights
	c.WeightsVersion = pc.WeightsVersion
	if pc.Policy != nil {
		c.Policy = *pc.Policy
	}
	c.PolicyVersion = pc.PolicyVersion
	return c
}
