package readiness

import (
	"errors"
	"fmt"
	"time"
)

// Errors of the package, wrapped with detail (the deployment name, the field):
// test them with errors.Is. The server maps them to gRPC codes.
var (
	// ErrInvalidConfig: Config.Validate rejected a field.
	ErrInvalidConfig = errors.New("readiness: invalid config")
	// ErrInvalidQuery: a Query field is empty or out of range, or Status was
	// given a nil Live.
	ErrInvalidQuery = errors.New("readiness: invalid query")
	// ErrSameDeployment: Query.From and Query.To name the same deployment.
	ErrSameDeployment = errors.New("readiness: from and to are the same deployment")
	// ErrUnknownDeployment: a Query names a deployment that is neither in the
	// pool now (Live) nor named by a pick inside the window.
	ErrUnknownDeployment = errors.New("readiness: unknown deployment")
)

// Defaults of the Config fields; a zero field means its default.
const (
	DefaultWindow          = 5 * time.Minute
	DefaultBuckets         = 60
	DefaultHotPrefixes     = 256
	DefaultMaxHotBlocks    = 1024
	DefaultMaxDeployments  = 8
	DefaultBlockSizeTokens = 16
	DefaultSketchPrecision = 12
	// DefaultRecomputeHorizonDivisor: a zero Config.RecomputeHorizon is
	// Window / DefaultRecomputeHorizonDivisor.
	DefaultRecomputeHorizonDivisor = 4
)

// Limits of the Config fields, checked by Validate.
const (
	MaxBuckets         = 3600
	MaxHotPrefixes     = 1 << 16
	MaxMaxHotBlocks    = 1 << 16
	MaxMaxDeployments  = 64 // a pick's deployments fit one uint64 mask
	MinSketchPrecision = 4
	MaxSketchPrecision = 16
)

// Config sizes a Tracker. Its zero value is the defaults. It is a plain
// value.
type Config struct {
	// Window is the span Status reports on. Default 5 min. It must be a
	// whole number of Buckets, each at least 1 ms.
	Window time.Duration
	// Buckets divides the window into a ring of Buckets buckets of
	// Window/Buckets each; the window slides one bucket at a time.
	// Default 60 (5 s buckets). Range [1, 3600].
	Buckets int
	// HotPrefixes is the capacity of the hot-prefix (Space-Saving) table.
	// Default 256. Range [1, 65536].
	HotPrefixes int
	// MaxHotBlocks is the longest hash chain kept per hot prefix, in blocks.
	// Default 1024. Range [1, 65536].
	MaxHotBlocks int
	// MaxDeployments is how many deployments are tracked per pool. Picks on
	// more are counted in the pool totals only (Status.UntrackedPicks), and
	// pairs with an untracked deployment are not kept. A tracked deployment
	// no pick has named for a whole window frees its slot. Default 8.
	// Range [1, 64]. The distinct-block sketches cost
	// Buckets × 2^SketchPrecision bytes per ordered pair actually seen.
	MaxDeployments int
	// BlockSizeTokens is the block size of an instance whose snapshot
	// BlockSizeTokens is 0 (the scheduler then uses the policy's); set it
	// to the pool policy's block_size_tokens. Default 16, the policy
	// default. Must be > 0 after defaulting.
	BlockSizeTokens uint32
	// SketchPrecision is the HyperLogLog precision p of the distinct-block
	// sketches: 2^p one-byte registers per bucket and pair, relative
	// standard error 1.04/√(2^p) (1.6% at 12). Default 12. Range [4, 16].
	SketchPrecision uint8
	// RecomputeHorizon is how far back the recompute estimate looks: the
	// distinct blocks of From's picks in the most recent
	// ⌈RecomputeHorizon / bucket width⌉ buckets, the current (partial) one
	// included, are the blocks To is expected to recompute after the
	// cutover (see Migration.DistinctBlocks and RecomputeHorizon). Default
	// Window/4 (30 s of a 2 min window, 75 s of 5 min). Range [0, Window];
	// Window counts the whole window.
	RecomputeHorizon time.Duration
}

// withDefaults returns c with every zero field set to its default.
func (c Config) withDefaults() Config {
	if c.Window == 0 {
		c.Window = DefaultWindow
	}
	if c.Buckets == 0 {
		c.Buckets = DefaultBuckets
	}
	if c.HotPrefixes == 0 {
		c.HotPrefixes = DefaultHotPrefixes
	}
	if c.MaxHotBlocks == 0 {
		c.MaxHotBlocks = DefaultMaxHotBlocks
	}
	if c.MaxDeployments == 0 {
		c.MaxDeployments = DefaultMaxDeployments
	}
	if c.BlockSizeTokens == 0 {
		c.BlockSizeTokens = DefaultBlockSizeTokens
	}
	if c.SketchPrecision == 0 {
		c.SketchPrecision = DefaultSketchPrecision
	}
	if c.RecomputeHorizon == 0 {
		c.RecomputeHorizon = c.Window / DefaultRecomputeHorizonDivisor
	}
	return c
}

// Validate reports the first invalid field of c (zero fields taking their
// defaults), in field order, as an error wrapping ErrInvalidConfig that
// names the field, e.g. "readiness: invalid config: buckets must be in
// [1, 3600] (0 means 60), got -1". It is safe for concurrent use.
func (c Config) Validate() error {
	c = c.withDefaults()
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidConfig, fmt.Sprintf(format, args...))
	}
	switch {
	case c.Window < 0:
		return bad("window must be > 0 (0 means %v), got %v", DefaultWindow, c.Window)
	case c.Buckets < 1 || c.Buckets > MaxBuckets:
		return bad("buckets must be in [1, %d] (0 means %d), got %d", MaxBuckets, DefaultBuckets, c.Buckets)
	case c.Window%time.Duration(c.Buckets) != 0:
		return bad("window %v is not a whole number of %d buckets (%v remain)", c.Window, c.Buckets,
			c.Window%time.Duration(c.Buckets))
	case c.Window/time.Duration(c.Buckets) < time.Millisecond:
		return bad("window/buckets must be >= 1ms, got %v", c.Window/time.Duration(c.Buckets))
	case c.HotPrefixes < 1 || c.HotPrefixes > MaxHotPrefixes:
		return bad("hot_prefixes must be in [1, %d] (0 means %d), got %d", MaxHotPrefixes, DefaultHotPrefixes, c.HotPrefixes)
	case c.MaxHotBlocks < 1 || c.MaxHotBlocks > MaxMaxHotBlocks:
		return bad("max_hot_blocks must be in [1, %d] (0 means %d), got %d", MaxMaxHotBlocks, DefaultMaxHotBlocks, c.MaxHotBlocks)
	case c.MaxDeployments < 1 || c.MaxDeployments > MaxMaxDeployments:
		return bad("max_deployments must be in [1, %d] (0 means %d), got %d", MaxMaxDeployments, DefaultMaxDeployments, c.MaxDeployments)
	case c.SketchPrecision < MinSketchPrecision || c.SketchPrecision > MaxSketchPrecision:
		return bad("sketch_precision must be in [%d, %d] (0 means %d), got %d",
			MinSketchPrecision, MaxSketchPrecision, DefaultSketchPrecision, c.SketchPrecision)
	case c.RecomputeHorizon < 0 || c.RecomputeHorizon > c.Window:
		return bad("recompute_horizon must be in [0, window %v] (0 means window/%d), got %v",
			c.Window, DefaultRecomputeHorizonDivisor, c.RecomputeHorizon)
	}
	return nil
}
