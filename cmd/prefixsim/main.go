// Command prefixsim simulates a prefixroute fleet: emulated model-server
// instances with prefix caches, a workload, and the real scheduler and
// router state deciding in virtual time. It links neither the daemon nor
// NATS: prefixload scenario plays the same scenario against real routers.
// See SIMULATION.md.
//
//	prefixsim run [flags] SCENARIO...   simulate and write CSV, summary.md, PNGs
//	prefixsim trace [flags] SCENARIO    write the scenario's workload as a JSONL trace
//	prefixsim list                      list the built-in scenarios
package main

import "os"

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }
