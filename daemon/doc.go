// Package daemon is prefixrouted's wiring, the one room where a
// server.Server meets the network: the gRPC listener with its transport
// limits and interceptor chain (middleware.go: auth, logging, recovery,
// the in-flight count), the HTTP listener (probes, /metrics, the
// frontend/httproute routes and the frontend/console at /ui/), the
// read-only metrics listener, the gRPC front ends such as
// frontend/extproc (daemon_frontend.go), TLS and the tokens file
// (auth_daemon.go, tls.go), OpenTelemetry (telemetry.go) and the one
// exposure rule of every listener: off loopback, a listener needs tokens
// and TLS unless Config.Insecure.
//
// Start binds the listeners, opens the data dir and serves until Shutdown;
// cmd/prefixrouted is a flag parser around it and internal/servertest
// starts one per test. See Example.
package daemon
