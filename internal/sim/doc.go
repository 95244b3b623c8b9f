// Package sim simulates a prefixroute fleet to measure the scheduling
// model's claims on a given workload: emulated model-server instances
// (FCFS prefill batches, an LRU prefix cache of the blocks they prefilled,
// optional decode), a workload (Poisson arrivals of shared-prefix and
// multi-turn requests, or a JSONL trace), deployments with a weight
// schedule (explicit steps, or a linear ramp expanded with the daemon's own
// rollout.Plan), and one or more routers. The routers are the production code:
// a internal/state Registry per router replica, a Session per instance fed
// with load reports (and cache events), Pool.Pick with its prefix index and
// optimistic accounting, and scheduler.Decide. Round-robin, random,
// prefix-affinity and an llm-d-style scorer (llmd.go) are the simulator's
// own baselines. A readiness
// probe (Scenario.Readiness) asks router 0's pool for its Migration
// estimate before a cutover and measures, from the emulated caches, what the
// deployment taking over then actually recomputed and prefilled
// (Result.Readiness).
//
// A PDScenario (pd_scenario.go) is a scenario on a disaggregated fleet:
// instances report prefill, decode or both roles; RunPD applies a prefill
// decider (the router's, or a baseline's override) to each pick and
// models the KV transfer, decode slots and the stall local prefills put on
// running decodes; RunPDSeeds gives medians over seeds.
//
// Run simulates one variant of a Scenario in virtual time with a discrete
// event queue; it is deterministic for a seed and every variant of a
// scenario sees the same requests. RunScenario runs all variants; a Result
// holds the records and samples, and internal/simout turns it into
// summaries, tables, CSV files and plots. A Driven run hands the
// clock and the routing to a loop outside the package: internal/simlive
// plays a scenario against real routers that way (prefixload scenario).
// The package never links the daemon. Scenarios are YAML (or JSON) files; the
// built-in ones live in scenarios/ (see ScenarioNames and LoadScenario).
//
// Concurrency: Run and RunScenario may be called concurrently (a
// Scenario is only read); a Result is a plain value once returned. The
// other types (Cache, Workload implementations) belong to one run and are
// not safe for concurrent use. SIMULATION.md at the repository root shows
// the scenarios' results.
package sim
