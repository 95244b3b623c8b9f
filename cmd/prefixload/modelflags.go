package main

import (
	"strconv"

	"github.com/prefixroute/prefixroute/internal/sim"
)

// modelFlags are the prefixrouted flags that give a router the model the
// simulator gives variant v (its backlog weight and queue ledger
// switches, off unless the variant turns them on, as in internal/sim),
// and whether any of them differs from the off state. They go when the
// daemon loses those switches (issue 27: the model lives in the policy).
func modelFlags(v sim.Variant) (flags []string, set bool) {
	noLedger := v.QueueLedger != nil && !*v.QueueLedger
	flags = []string{"--backlog-weight=" + strconv.FormatBool(v.BacklogWeight),
		"--backlog-busy=" + strconv.FormatBool(v.BacklogBusy),
		"--backlog-externality=" + strconv.FormatBool(v.BacklogExternality),
		"--no-queue-ledger=" + strconv.FormatBool(noLedger)}
	return flags, noLedger || v.BacklogWeight || v.BacklogBusy || v.BacklogExternality
}
