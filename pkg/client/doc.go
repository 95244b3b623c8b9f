// Package client is what gateways and model-server instances written in Go
// import to talk to the prefixroute sidecar.
//
// # Connection
//
// Dial makes the one grpc.ClientConn a process needs: plaintext by default,
// keepalive pings, a short reconnect backoff, and errors marked so that
// Unreachable can tell "the sidecar could not be reached" from "the sidecar
// answered with an error". Share it between every Picker and Reporter of the
// process; close it last.
//
// DialWith connects to a sidecar that runs with authentication (a tokens
// file, TLS, mutual TLS; see SECURITY.md): DialOptions.TLS (from TLSConfig)
// and DialOptions.Token (from ReadTokenFile), sent with every call as
// "authorization: Bearer <token>". A gateway needs a token of role gateway,
// an instance one of role instance (bound, ideally, to its pool and
// deployment).
//
// # Gateways: Picker
//
// A Picker asks PickService.Pick which instance should serve a request. It
// hashes the prompt with prefixhash, from the token ids (Request.Tokens,
// token mode, blocks of PickerOptions.BlockSize tokens) or the text
// (Request.Text, text mode), with the seed of the pool name and optional
// salt, or sends hashes the gateway computed itself (Request.Hashes). Each
// call has a deadline (PickerOptions.Timeout, 100ms by default) unless the
// caller's context ends sooner.
//
// When the sidecar cannot answer, the caller chooses what happens: without
// a fallback list (the default) Pick returns the error; with
// PickerOptions.Fallback it chooses from that static list by rendezvous
// hashing of the request's first block hash, which keeps requests with a
// common prefix on one instance, and returns the choice with
// Result.Fallback set and Result.Cause saying why. See Endpoint.
//
// # Instances: Reporter
//
// A Reporter keeps an instance's LoadService.ReportLoad stream open. Every
// interval (100ms until the sidecar names another in its acks) it calls the
// instance's Load callback and sends the figures. With
// ReporterOptions.CacheEvents the instance also reports its KV-cache
// events: Stored, Removed and Cleared queue them, and the next report
// carries them, split across several messages when there are more than
// MaxEventsPerMessage (the sidecar's per-message limit). Flush sends the
// queued events early (paced by ReporterOptions.FlushGap, within the
// sidecar's reports-per-second limit); ReporterOptions.Hold stops the
// reports while the instance cannot vouch for its figures, so the sidecar
// marks it stale.
//
// After any stream failure (the sidecar restarting, a network error, a
// rejected report) the Reporter reconnects under the same identity: the
// first retry after 100 ms ± 50 ms, then jittered exponential backoff
// (doubling to 10s, full jitter), a wait ending as soon as the connection
// is ready again; the reconnect is logged at INFO with its time and
// attempts.
// Every new stream starts with a full snapshot of the instance's cache
// (cache_cleared with every held block), so a restarted sidecar learns the
// instance's cache at once; the events of the time it was away are never
// replayed one by one. The snapshot comes from ReporterOptions.Snapshot, or,
// when that is nil, from the Reporter's own record of Stored and Removed.
//
// # Concurrency
//
// Picker, Reporter and the connection are safe for concurrent use. A
// Reporter calls its callbacks from its own goroutine, one call at a time.
package client
