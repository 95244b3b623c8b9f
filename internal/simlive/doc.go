// Package simlive plays a simulator scenario (internal/sim) against real
// prefixrouted replicas over gRPC, in wall-clock time scaled by a speed
// factor: the scenario's emulated instances stream ReportLoad through
// pkg/client Reporters (instance k on replica k mod n), gateway workers
// call Pick through pkg/client Pickers (worker i on replica i mod n), and
// the weight schedule goes through AdminService.SetWeights on the first
// replica. The emulated fleet, workload and metrics are internal/sim's
// (sim.Driven), so a live Result has the same shape, summaries and files
// as a simulated one, plus the gRPC figures in Result.Live. prefixload
// scenario is its command; it only connects to loopback addresses.
//
// The package starts no router: the caller passes their addresses.
// RunLive is safe for concurrent use with distinct pools.
package simlive
