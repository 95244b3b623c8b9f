package daemon

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/prefixroute/prefixroute/internal/state"
)

// Memory cap: when --max-index-pairs is not set, the prefix-index cap is
// derived from the memory limit of the process (the cgroup limit or
// GOMEMLIMIT, whichever is smaller).
const (
	// DefaultCgroupRoot is where the cgroup file system is mounted.
	DefaultCgroupRoot = "/sys/fs/cgroup"
	// IndexBytesPerPair is the memory one prefix-index (block, instance)
	// pair costs the process: at most 82 bytes of live heap (measured by
	// TestIndexBytesPerPair in internal/state and TestIndexMemoryUnderLimit
	// here) times 2 for the collector's headroom at GOGC=100.
	IndexBytesPerPair = 165
	// IndexMemoryFraction is the share of the memory limit the derived cap
	// gives the prefix index; the other 40% is for everything else
	// (gRPC and HTTP buffers, request bodies, the registry, the runtime).
	IndexMemoryFraction = 0.6
)

// MemoryLimit is a memory limit of the process and where it came from.
type MemoryLimit struct {
	Bytes  int64  // 0: no limit found
	Source string // "cgroup v2 /sys/fs/cgroup/memory.max", "GOMEMLIMIT", or ""
}

// memoryLimit returns the smaller of the cgroup limit under cgroupRoot and
// goMemLimit (the runtime's limit, math.MaxInt64 when unset). A missing or
// unreadable cgroup file, or "max", is no limit.
func memoryLimit(cgroupRoot string, goMemLimit int64) MemoryLimit {
	var l MemoryLimit
	if b, src, ok := cgroupLimit(cgroupRoot); ok {
		l = MemoryLimit{Bytes: b, Source: src}
	}
	if goMemLimit > 0 && goMemLimit < math.MaxInt64 && (l.Bytes == 0 || goMemLimit < l.Bytes) {
		l = MemoryLimit{Bytes: goMemLimit, Source: "GOMEMLIMIT"}
	}
	return l
}

// cgroupLimit reads the cgroup v2 memory.max, else the v1
// memory/memory.limit_in_bytes (or memory.limit_in_bytes at the root). v1
// reports "no limit" as a huge number (about 2^63 rounded to the page);
// anything over 2^62 bytes is taken as none.
func cgroupLimit(root string) (int64, string, bool) {
	for _, p := range []string{
		filepath.Join(root, "memory.max"),
		filepath.Join(root, "memory", "memory.limit_in_bytes"),
		filepath.Join(root, "memory.limit_in_bytes"),
	} {
		b, err := os.ReadFile(p)
		if errors.Is(err, fs.ErrNotExist) || err != nil {
			continue
		}
		s := strings.TrimSpace(string(b))
		if s == "max" {
			return 0, "", false
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n <= 0 || n > 1<<62 {
			return 0, "", false
		}
		return n, "cgroup " + p, true
	}
	return 0, "", false
}

// IndexCap is a derived prefix-index cap and how it was derived.
type IndexCap struct {
	Pairs    int         // the cap, MaxIndexPairs
	Limit    MemoryLimit // the limit it was derived from; zero: none, default cap
	Explicit bool        // set by --max-index-pairs, not derived
}

// deriveIndexCap returns the index cap for limit: IndexMemoryFraction of
// it at IndexBytesPerPair, at least 1024 pairs and at most
// state.DefaultMaxIndexPairs; the default without a limit.
func deriveIndexCap(limit MemoryLimit) IndexCap {
	if limit.Bytes <= 0 {
		return IndexCap{Pairs: state.DefaultMaxIndexPairs}
	}
	pairs := int64(float64(limit.Bytes) * IndexMemoryFraction / IndexBytesPerPair)
	pairs = max(1024, min(pairs, state.DefaultMaxIndexPairs))
	return IndexCap{Pairs: int(pairs), Limit: limit}
}

// String is the start-up log line's text, e.g. "index cap 3,903,782 pairs
// (≈ 614 MiB of a 1024 MiB limit, cgroup /sys/fs/cgroup/memory.max)".
func (c IndexCap) String() string {
	mib := float64(c.Pairs) * IndexBytesPerPair / (1 << 20)
	if c.Explicit {
		return fmt.Sprintf("index cap %s pairs (≈ %.0f MiB, set by --max-index-pairs)", commas(c.Pairs), mib)
	}
	if c.Limit.Bytes == 0 {
		return fmt.Sprintf("index cap %s pairs (≈ %.0f MiB; no memory limit found: set GOMEMLIMIT or a cgroup limit, or --max-index-pairs)", commas(c.Pairs), mib)
	}
	return fmt.Sprintf("index cap %s pairs (≈ %.0f MiB of a %.0f MiB limit, %s)", commas(c.Pairs), mib, float64(c.Limit.Bytes)/(1<<20), c.Limit.Source)
}

// commas formats n with thousands separators.
func commas(n int) string {
	s := strconv.Itoa(n)
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// applyIndexCap sets cfg's MaxIndexPairs from the memory limit when it is
// not set, and returns the cap in force for the start-up log.
func applyIndexCap(cfg *Config) IndexCap {
	if n := cfg.Server.Limits.MaxIndexPairs; n > 0 {
		return IndexCap{Pairs: n, Explicit: true}
	}
	root := cfg.CgroupRoot
	if root == "" {
		root = DefaultCgroupRoot
	}
	c := deriveIndexCap(memoryLimit(root, debug.SetMemoryLimit(-1)))
	cfg.Server.Limits.MaxIndexPairs = c.Pairs
	return c
}
