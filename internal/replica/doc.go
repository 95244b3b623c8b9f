// Package replica joins one prefixrouted to the other replicas of a
// cluster: it publishes what this replica sees, applies what the others
// publish, keeps the pools' configuration in the shared bucket and brings
// a replica that joins (or comes back after losing NATS) up to date. The
// NATS transport is internal/cluster (opaque bytes); this package gives
// the bytes their meaning (the ClusterEvent and PoolSnapshots messages of
// proto/prefixroute/v1/cluster.proto).
//
// A Replica works on a Host, the server whose state it replicates, through
// a narrow interface: the live state (state.Registry), the local data dir
// (store.Store), a way to put a configuration in force (Host.Install) and
// the host's configuration lock. It never sees the gRPC layer. A single
// process has no Replica at all (the server uses its own no-op).
//
// # What is replicated
//
//   - Configuration (weights, policy, ramp) of every pool: one key per pool
//     ("pool." + cluster.EncodeToken(pool)) in the JetStream KV bucket.
//     Change writes by compare-and-set on the key's revision, retrying when
//     another replica wrote in between; the watch (cluster.Handlers.OnConfig)
//     puts every replica's writes in force here and keeps them in the local
//     data dir, the copy a restart without NATS starts from. Per pool the
//     replica remembers the bucket revision in force here, so its own write
//     coming back through the watch, or an older revision the watch
//     delivers late, never rolls the pool back.
//   - Load reports, cache events included, received on this replica's
//     ReportLoad streams (Reported), stream ends (StreamEnded) and the work
//     each pick gives an instance (Picked): core NATS events, batched per
//     pool, not persisted. Another replica applies an instance's reports to
//     a "remote" session of its own; an instance that reports to this
//     replica (StreamOpened) is never driven by others' events.
//
// While NATS is away the replica is fail-static: routing goes on with the
// last view and this replica's own reports, and Change fails with
// ErrClusterUnavailable ("nothing was changed") instead of letting the
// replicas diverge.
//
// # Catch-up
//
// A replica that joins or reconnects has missed events, which are not
// persisted. It asks one peer for its
// whole view (cluster.Link.RequestSnapshot):
//
//  1. From Dial (or the reconnect) on, the events of remote instances are
//     recorded, raw and in arrival order, as well as applied.
//  2. The peer's snapshot arrives (every live instance with its last report
//     and whole cache) and is imported under the same lock as event
//     application, so no event lands in between. Importing resets each
//     instance to the peer's view, which may predate events recorded in 1:
//     those numbered after the snapshot's report of the instance are
//     applied again on top of it.
//  3. The peer may itself have been behind, and its snapshot may predate
//     events published before this replica subscribed, which no recording
//     holds. The first report of an imported instance numbered beyond the
//     snapshot's next one reveals that gap; the snapshot is then asked for
//     again, at most maxGapPulls times per catch-up.
//  4. A failed request (a peer too busy to answer within SnapshotTimeout) is
//     retried with backoff, up to maxSnapshotRetries times; the first
//     replica of a cluster, which has heard from no other, starts from its
//     own reports.
//
// Older replicas could instead ask every peer (an event on the subject of
// the empty pool name) to have its instances resend their caches; such
// requests are now ignored.
//
// # Concurrency
//
// A Replica is safe for concurrent use. Its own state is guarded by its
// own locks; the host's configuration lock is taken (always before the
// replica's) only to put another replica's configuration in force, so
// that it is never interleaved with a change the host prepares from its
// copy and makes through Change.
package replica
