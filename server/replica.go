package server

import (
	"go.opentelemetry.io/otel/metric"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/internal/replica"
	"github.com/prefixroute/prefixroute/internal/state"
	"github.com/prefixroute/prefixroute/internal/store"
)

// Replicator is what the handlers tell the other replicas of a cluster
// and ask of them. Server holds one always: a *replica.Replica when
// Options.Cluster is set, otherwise standalone, under which a single
// process behaves as if it were alone. Implementations are safe for
// concurrent use.
type Replicator interface {
	// Start joins the cluster (see StartCluster); Close leaves it.
	Start()
	Close()
	// Change makes a configuration change: in the cluster's bucket, then
	// the local store. It does not put the result in force (the caller
	// does, with install). Called with adminMu held.
	Change(pool string, e store.Edit, caller string) (store.PoolConfig, error)
	// StreamOpened and StreamEnded bracket a ReportLoad stream of
	// instance in pool; closed says whether the stream had a session.
	StreamOpened(pool, instance string)
	StreamEnded(pool, instance string, closed bool)
	// Reported passes on a report applied from a stream of id; m's
	// identity fields may be filled in.
	Reported(id state.Identity, m *pb.ReportLoadRequest)
	// Picked passes on the work a pick of pool gave its instance.
	Picked(pool string, out *state.Pick, hashes []uint64)
	// Outcomes passes on the outcomes of a ReportOutcome call of pool that
	// bear on reachability; res is what applying them here did.
	Outcomes(pool string, outs []state.Outcome, res state.OutcomeResult)
	// RegisterMetrics exports the replication's metrics on m.
	RegisterMetrics(m metric.Meter) error
}

// standalone is the Replicator of a single process: changes go to the
// local store, and nothing is passed on.
type standalone struct{ store *store.Store }

func (standalone) Start() {}
func (standalone) Close() {}
func (s standalone) Change(pool string, e store.Edit, caller string) (store.PoolConfig, error) {
	return s.store.Change(pool, e, caller)
}
func (standalone) StreamOpened(string, string)                           {}
func (standalone) StreamEnded(string, string, bool)                      {}
func (standalone) Reported(state.Identity, *pb.ReportLoadRequest)        {}
func (standalone) Picked(string, *state.Pick, []uint64)                  {}
func (standalone) Outcomes(string, []state.Outcome, state.OutcomeResult) {}
func (standalone) RegisterMetrics(metric.Meter) error                    { return nil }

// replicaHost is the Server as a replica.Host: its configuration lock is
// adminMu.
type replicaHost struct{ s *Server }

func (h replicaHost) Locked(fn func() error) error {
	h.s.adminMu.Lock()
	defer h.s.adminMu.Unlock()
	return fn()
}
func (h replicaHost) Registry() *state.Registry { return h.s.reg }
func (h replicaHost) Store() *store.Store       { return h.s.store }
func (h replicaHost) Install(pool string, pc store.PoolConfig) error {
	return h.s.install(pool, pc)
}

// newReplicator returns the Replicator opts ask for.
func newReplicator(s *Server, opts Options) (Replicator, error) {
	if opts.Cluster == nil {
		return standalone{store: s.store}, nil
	}
	r, err := replica.New(replicaHost{s}, replica.Options{Cluster: *opts.Cluster, Logger: opts.Logger, Now: opts.Now,
		Freed: s.flow.Kick}) // another replica's report or outcome may free capacity for picks waiting here
	if err != nil {
		return nil, err
	}
	return r, nil
}

// applyEdit makes one configuration change through the Replicator: in the
// local store, or, when clustered, in the bucket (then the local copy).
// Called with adminMu held.
func (s *Server) applyEdit(pool string, e store.Edit, caller string) (store.PoolConfig, error) {
	return s.repl.Change(pool, e, caller)
}

var (
	_ Replicator   = standalone{}
	_ Replicator   = (*replica.Replica)(nil)
	_ replica.Host = replicaHost{}
)
