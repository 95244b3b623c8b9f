// Package cluster is the NATS link that lets several prefixrouted
// replicas share one view. It is transport only: every value and payload
// is opaque bytes, and the package knows nothing of pools' contents,
// weights or load reports.
//
// A Link, from Dial, offers three channels, all safe for concurrent use:
//
// # Config KV (JetStream, persisted)
//
// One JetStream KV bucket (Config.Bucket, created at Dial if missing,
// file storage, Config.History revisions per key, which are the audit
// trail) holds the shared configuration. Get, Create, Update
// (compare-and-set on the revision), Delete and History are bounded by
// Config.ApplyTimeout and fail fast with ErrUnavailable while NATS is
// disconnected (the client keeps no reconnect buffer, so a write that
// was refused is never applied later). Handlers.OnConfig sees every
// write of every key in revision order; Dial returns after the initial
// sync. After each reconnect the watch is re-created from the last
// delivered revision + 1, so the writes made while the link was away
// are delivered, oldest first, and none twice. If the bucket is deleted
// and re-created (revisions restart) the link does not notice: re-Dial.
//
// # Events (core NATS, not persisted)
//
// Publish(pool, payload) never blocks on the network. Payloads are
// framed as uvarint(length) || bytes and batched per pool; a batch is
// sent as one message on "<SubjectPrefix>.events.<EncodeToken(pool)>"
// when it reaches Config.MaxBatchBytes, or Config.FlushInterval after its
// first event. Headers: HeaderOrigin (the sender's Config.Name) and
// HeaderSentAt (Unix ns when the batch was handed to NATS, for lag). One
// sender goroutine publishes, so a receiver sees each origin's batches in
// order. Sealed batches wait in an outbox bounded by
// Config.MaxPendingBytes while NATS is away; when it is full the oldest
// batches are dropped and counted (Stats.Dropped*). The connection uses
// no-echo and receivers also drop batches carrying their own Name, so a
// replica never applies its own events; Names must be unique.
//
// # Snapshots (core NATS request, chunked)
//
// RequestSnapshot(ctx, pool) publishes a request on
// "<SubjectPrefix>.snapshot.<EncodeToken(pool)>" with a private inbox as
// reply subject. Every replica that called ServeSnapshots runs its
// handler and streams the result to that inbox in chunks of at most the
// server's max_payload minus 8 KiB. Each chunk is a request carrying the
// headers Prefixroute-Chunk (index), Prefixroute-Chunks (count),
// Prefixroute-Size (total bytes) and Prefixroute-Crc32c (of the whole
// snapshot); the requester answers "next", "done" or "cancel", so one
// chunk is in flight per stream (flow control, no slow-consumer loss).
// The first replica whose chunk 0 arrives wins; the others get "cancel"
// after their first chunk. The requester checks order, size and CRC. A
// handler error is sent back in Prefixroute-Error and the requester
// waits for another replica. With no replica serving, the NATS server's
// no-responders status makes RequestSnapshot fail with ErrNoPeers at once;
// otherwise it waits at most SnapshotTimeout for a first chunk.
//
// # State and stats
//
// State reports connected, disconnected or closed (Handlers.OnState on
// change); the client reconnects forever until Close. Stats returns the
// counters the daemon exports as metrics.
package cluster
