// Package server is prefixroute's gRPC layer and daemon: the handlers of
// PickService, LoadService and AdminService (pick.go, load.go, admin.go,
// ramp.go, migration.go), their interceptors (middleware.go, limits.go,
// auth*.go), the observability of a Pick (pickrecord.go, metrics*.go,
// span.go, decisionlog.go, observe.go) and the daemon that wires them to
// listeners (daemon*.go, telemetry.go). The model itself lives below it:
// scheduler (the pure decision), internal/state (live pools, prefix index,
// optimistic accounting), internal/store (durable configuration and audit
// log), internal/readiness (migration readiness), internal/rollout (ramps).
//
// # Running a daemon
//
// Start binds the gRPC listener (and the HTTP one of /healthz, /readyz,
// /metrics and the HTTP front ends unless HTTPListen is "off", and the
// read-only one of the probes and /metrics when MetricsListen is set), opens the data dir and serves until
// Shutdown; prefixrouted is a thin flag parser around it. See Example.
// A Server without a Daemon (New, then Register on a grpc.Server of one's
// own) serves the same services without metrics, traces or decision log.
//
// # One Pick through the packages
//
//	pickService.Pick (gRPC), or another front end
//	  → Server.PickFor                        pickrecord.go: the one entry point
//	    → Server.pick                          pick.go: validate, seed the PCG
//	      → state.Registry.Pool, ValidatePick
//	      → state.Pool.Pick                    snapshot under RLock, prefix-index match
//	        → scheduler.Decide                 no lock: deployment, then instance
//	        → assign                           optimistic accounting under Lock
//	        → readiness.Tracker.Record         the migration-readiness window
//	      → pickResponseAt                     the audit level the client asked for
//	    → Server.recorded(pickRecord)          once per pick:
//	        observer.done                      metrics, span attributes, decision log,
//	                                           the console's 15-minute ring (history.go)
//	        logFailedPick                      a failed pick's log line
//
// A front end other than gRPC (an HTTP route endpoint, an Envoy ext_proc
// server) turns its request into a pb.PickRequest and calls PickFor with
// the caller's trace context in ctx and a frontend.PickMeta; it gets the same
// metrics, span attributes, decision-log line and log line as a gRPC Pick.
// The operator console (server/console, at /ui/ on the HTTP listener) is
// one: its Explain calls PickFor, and its other pages call the
// AdminService implementation, through consoleBackend (console_backend.go).
package server
