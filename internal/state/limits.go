package state

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
	// pools together: the global bound on the index's memory (about 75
	// bytes of live heap and 165 of RSS a pair, see doc.go). Past it, the
	// pool that adds evicts its largest instance's least recently used
	// blocks. Default 67108864 (2^26, up to about 5 GB of live heap, 11 GB
	// of RSS).
	MaxIndexPairs int
	// MaxNameBytes bounds pool, deployment, instance id and address. Default
	// 128 bytes.
	MaxNameBytes int
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
