package state

import "github.com/prefixroute/prefixroute/internal/readiness"

// Limits bounds what clients can make the state layer hold. The zero value of
// a field means its default. Limits is a plain value, safe to copy.
type Limits struct {
	// MaxPools bounds the number of pools. Default 1024.
	MaxPools int
	// MaxInstancesPerPool bounds the instances of one pool. Default 4096.
	MaxInstancesPerPool int
	// MaxPrefixBlocks bounds the prefix hashes of one Pick. Default 8192.
	MaxPrefixBlocks int
	// MaxBlockEvents bounds stored_block_hashes + removed_block_hashes of one
	// report. Default 65536.
	MaxBlockEvents int
	// MaxExcludes bounds exclude_instances and load-snapshot entries of one
	// Pick. Default 1024.
	MaxExcludes int
	// MaxBlocksPerInstance caps the prefix index of one instance, whatever
	// kv_capacity_blocks it reports. Default 1048576 blocks.
	MaxBlocksPerInstance int
	// MaxIndexPairs caps the prefix-index (block, instance) pairs of all
	// pools together: the global bound on the index's memory (36 to 82
	// bytes a pair, see doc.go). Past it, the pool that adds evicts its
	// largest instance's least recently used blocks. Default 67108864
	// (2^26, about 2.4 to 5.5 GB).
	MaxIndexPairs int
	// MaxNameBytes bounds pool, deployment, instance id and address. Default
	// 128 bytes.
	MaxNameBytes int
	// Migration configures each pool's migration-readiness tracker (the
	// window of picks GetMigrationStatus reads); the zero value takes the
	// defaults of readiness.Config (a 5 min window in 60 buckets, 256 hot
	// prefixes, 8 deployments).
	Migration readiness.Config
	// NoQueueLedger turns the queue ledger off (see ledger): the scheduler
	// then sees every report's queue figures as reported. Default false:
	// the ledger caps them. For comparisons.
	NoQueueLedger bool
	// BacklogWeight weighs the prefill term of every pick's costs by 1 +
	// the fewest requests any instance of the pool has waiting (see
	// backlogWeight). Default false here, the model's cost exactly;
	// prefixrouted turns it on (--backlog-weight, SIMULATION.md section 5).
	BacklogWeight bool
	// BacklogBusy makes the backlog weight's utilisation the larger of the
	// prefill tokens picked per second of throughput and the fraction of
	// instances whose reports show prefill work queued or running (see
	// backlogWeight, reportsBusy). No effect without BacklogWeight.
	// Default false; prefixrouted turns it on (--backlog-busy).
	BacklogBusy bool
	// BacklogExternality makes the backlog weight's utilisation term
	// 1 + ρ/(1 − ρ)², the M/M/1 externality of a unit of work, instead of
	// 1/(1 − ρ) (see utilWeight). No effect without BacklogWeight. Default
	// false; prefixrouted turns it on (--backlog-externality).
	BacklogExternality bool
}

// Default limits.
const (
	DefaultMaxPools             = 1024
	DefaultMaxInstancesPerPool  = 4096
	DefaultMaxPrefixBlocks      = 8192
	DefaultMaxBlockEvents       = 65536
	DefaultMaxExcludes          = 1024
	DefaultMaxNameBytes         = 128
	DefaultMaxBlocksPerInstance = 1 << 20
	DefaultMaxIndexPairs        = 1 << 26
)

// withDefaults returns l with every zero field set to its default.
func (l Limits) withDefaults() Limits {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&l.MaxPools, DefaultMaxPools)
	def(&l.MaxInstancesPerPool, DefaultMaxInstancesPerPool)
	def(&l.MaxPrefixBlocks, DefaultMaxPrefixBlocks)
	def(&l.MaxBlockEvents, DefaultMaxBlockEvents)
	def(&l.MaxExcludes, DefaultMaxExcludes)
	def(&l.MaxNameBytes, DefaultMaxNameBytes)
	def(&l.MaxBlocksPerInstance, DefaultMaxBlocksPerInstance)
	def(&l.MaxIndexPairs, DefaultMaxIndexPairs)
	return l
}
