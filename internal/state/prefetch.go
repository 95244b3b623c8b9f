//go:build amd64 || arm64

package state

// prefetch asks the CPU to bring the cache lines at the peekAhead
// addresses of addrs into its caches, and returns without waiting for
// them: a hint, which loads nothing into registers, stalls nothing and
// faults on no address (PREFETCHT0 on amd64, PRFM PLDL1KEEP on arm64; Go
// has no portable prefetch). The match uses it to have the home slots of
// the next blocks on their way while it works on the current ones.
//
//go:noescape
func prefetch(addrs *[peekAhead]uintptr)
