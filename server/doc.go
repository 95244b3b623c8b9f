// Package server is prefixroute's gRPC layer: the handlers of PickService,
// LoadService and AdminService (pick.go, admin.go, ramp.go, migration.go),
// LoadService (load.go, which hands both report RPCs to the one
// report-stream engine, internal/report), the observability of a Pick (pickrecord.go,
// metrics*.go, span.go, pickring.go, history.go; the decision log is
// internal/decisionlog, fed by observer.logDecision) and the
// control loops (ramp_driver.go, Sweep). Package daemon wires a Server to
// its listeners, middleware, TLS and tokens; the front ends other than
// gRPC live under frontend/ and see a Server as a frontend.Picker. The
// model itself lives below it:
// scheduler (the pure decision), internal/state (live pools, prefix index,
// optimistic accounting), internal/store (durable configuration and audit
// log), internal/readiness (migration readiness), internal/rollout (ramps).
//
// # Serving
//
// New opens the data dir; Register puts the services on a grpc.Server.
// daemon.Start does that with every listener, the interceptor chain,
// metrics, traces and the decision log (Observe, LimitReports); a Server
// served on a grpc.Server of one's own has neither until those are called.
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
// The operator console (frontend/console, at /ui/ on the HTTP listener) is
// one: its Explain calls PickFor, and its other pages call the
// AdminService implementation (Server.Admin).
package server
