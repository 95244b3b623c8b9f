package scheduler

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The bounds of the Policy fields, as their doc comments state them.
const (
	MaxLambdaH                        = 100
	MinDeltaMs                        = 0.001 // also deployment_delta_ms when on
	MaxDeltaMs                        = 1e6
	MaxThresholdRatio                 = 10
	MaxThresholdMinMs                 = 1e6
	MaxBatchWaitMs                    = 60000
	MaxBlockSizeTokens                = 1 << 20
	MinPrefillTokensPerSecond         = 1
	MaxPrefillTokensPerSecond         = 1e8
	MaxMaxQueueMs                     = 600000
	MinStaleAfter                     = 10 * time.Millisecond
	MaxStaleAfter                     = time.Hour
	MaxForgetAfter                    = 24 * time.Hour
	MaxDefaultKVCapacityBlocks uint64 = 1 << 30
)

// PolicyError lists every problem Validate found in a policy, one per field
// in field order. It wraps ErrInvalidPolicy; its message carries no package
// prefix ("invalid policy: a; b"). A plain value, safe for concurrent reads.
type PolicyError struct {
	Problems []string
}

// Error joins the problems: "invalid policy: p1; p2".
func (e *PolicyError) Error() string { return "invalid policy: " + strings.Join(e.Problems, "; ") }

// Unwrap returns ErrInvalidPolicy.
func (e *PolicyError) Unwrap() error { return ErrInvalidPolicy }

// checker collects the problems of one policy.
type checker struct{ problems []string }

func (c *checker) add(format string, args ...any) {
	c.problems = append(c.problems, fmt.Sprintf(format, args...))
}

// float checks lo <= v <= hi (false for NaN and infinities).
func (c *checker) float(name string, v, lo, hi float64, unit string) {
	if !(v >= lo && v <= hi) {
		c.add("%s must be in [%s, %s]%s, got %s", name, fmtNum(lo), fmtNum(hi), withUnit(unit), fmtNum(v))
	}
}

func (c *checker) uint(name string, v, lo, hi uint64, unit string) {
	if v < lo || v > hi {
		c.add("%s must be in [%d, %d]%s, got %d", name, lo, hi, withUnit(unit), v)
	}
}

func (c *checker) err() error {
	if len(c.problems) == 0 {
		return nil
	}
	return &PolicyError{Problems: c.problems}
}

func withUnit(unit string) string {
	if unit == "" {
		return ""
	}
	return " " + unit
}

// fmtNum prints whole numbers below 1e15 without an exponent (60000, not
// 6e+04) and everything else in the shortest form.
func fmtNum(v float64) string {
	if v == float64(int64(v)) && v < 1e15 && v > -1e15 {
		return strconv.FormatInt(int64(v), 10)
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}
