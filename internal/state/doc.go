// Package state is the router's live state: pools, their instances with the
// latest load report of each, the prefix index (which instance holds which
// block hash), optimistic accounting of the work assigned between reports,
// and the snapshot each decision is made on.
//
// It is used by the gRPC services in package server and, with virtual time,
// by the simulator: no method reads a clock; every one that needs the time
// takes it as an argument.
//
// # Prefix index
//
// Each pool maps block hash -> the instances holding it. Instances that set
// reports_cache_events get an exact index from their stored / removed
// events; for the others the router records each request's blocks on the
// instance it picked. Either way an instance's entries are an LRU bounded by
// its kv_capacity_blocks (else the policy's default_kv_capacity_blocks), and
// never more than Limits.MaxBlocksPerInstance.
//
// Memory, measured by BenchmarkIndexMemory and TestIndexBytesPerPair as live
// heap (runtime.MemStats.HeapAlloc after a GC; index plus LRUs, per (block,
// instance) pair): about 75 bytes (at most 82) when each block is held by
// one instance, 58 bytes when by two, 45 when by four, 36 bytes when every
// instance of a 1,000-instance pool holds it (holder sets become bitsets).
// Of that, an LRU entry is about 34 bytes and a block's index entry about
// 48 bytes, shared by its holders (up to three holders fit in the entry).
// The process RSS grows by about twice the live heap (the collector's
// headroom at GOGC=100): about 165 bytes a pair on one instance, as the
// 2026-12-04 security review measured. So a pool of 1,000 instances at the
// default 16,384 blocks each needs at most about 1.4 GB of live heap (about
// 2.8 GB of RSS), and typically much less because shared prefixes are
// shared.
//
// # Optimistic accounting
//
// A pick adds the request's prefill work (scheduler.WorkTokens: its
// uncached prompt tokens with the attention term) to the chosen instance's
// assigned work, which the scheduler adds to the instance's queue; the next
// report from that instance replaces the estimate with the instance's own
// figures. So gateways picking between two reports spread out instead of all
// choosing the same best instance.
//
// # Queue ledger and backlog weight
//
// The router also remembers the predicted prefill work of each
// instance's latest picks and caps a report's queue at what its waiting and
// running picks will really prefill (ledger.go): engines report whole
// prompts. A pick's prefill term is weighed by how backlogged the pool is
// (backlog.go). The math of both is the scheduler's (scheduler.LedgerQueue,
// scheduler.BacklogWeight); this package keeps the sums they read.
package state
