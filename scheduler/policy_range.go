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
	MaxPDTransferMsPerToken           = 1000
	MaxPDMinUncachedTokens            = 10000000
	MaxPDInterferenceWeight           = 100
	MaxPDDecodeRunningMs              = 1000
	MaxShortLanes                     = 8
	MinShortLaneMaxPrefillMs          = 1
	MaxShortLaneMaxPrefillMs          = 1e6
	MinQueueTTL                       = 10 * time.Millisecond
	MaxQueueTTL                       = 10 * time.Minute
	MaxQueueWaiting                   = 100000 // queue_max_waiting and queue_max_per_band
	MaxDispatchSpacingMs              = 1000
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

// check adds f's problem in p to c, if any: its value outside its range.
func (f *PolicyField) check(p *Policy, c *checker) {
	if f.explain != nil {
		f.explain(f, p, c)
		return
	}
	switch f.Kind {
	case FieldEnum:
		if v := *f.Enum(p); int(v) >= len(f.Names) {
			c.add("%s must be %s, got %s", f.Key, f.NameList(), nameOf(f.Names, int(v), f.enumType))
		}
	case FieldFloat:
		v := *f.Float(p)
		switch {
		case f.ZeroOff && f.Min > 0:
			if v != 0 && !(v >= f.Min && v <= f.Max) {
				c.add("%s must be 0 (off) or in [%s, %s]%s, got %s", f.Key, fmtNum(f.Min), fmtNum(f.Max), withUnit(f.Unit), fmtNum(v))
			}
		case f.OpenMin:
			if !(v > f.Min && v <= f.Max) {
				c.add("%s must be in (%s, %s]%s, got %s", f.Key, fmtNum(f.Min), fmtNum(f.Max), withUnit(f.Unit), fmtNum(v))
			}
		default:
			c.float(f.Key, v, f.Min, f.Max, f.Unit)
		}
	case FieldUint32:
		c.uint(f.Key, uint64(*f.Uint32(p)), uint64(f.Min), uint64(f.Max), f.Unit)
	case FieldUint64:
		c.uint(f.Key, *f.Uint64(p), uint64(f.Min), uint64(f.Max), f.Unit)
	case FieldDuration:
		if v := *f.Duration(p); v < f.MinDuration || v > f.MaxDuration {
			c.add("%s must be in [%v, %v], got %v", f.Key, f.MinDuration, f.MaxDuration, v)
		}
	}
}

// explainForgetAfter checks forget_after against [stale_after,
// MaxForgetAfter], naming stale_after's value when it is valid itself.
func explainForgetAfter(f *PolicyField, p *Policy, c *checker) {
	staleOK := p.StaleAfter >= MinStaleAfter && p.StaleAfter <= MaxStaleAfter
	switch {
	case p.ForgetAfter > f.MaxDuration:
		c.add("forget_after must be in [stale_after, %v], got %v", f.MaxDuration, p.ForgetAfter)
	case p.ForgetAfter < p.StaleAfter && staleOK:
		c.add("forget_after must be >= stale_after (%v), got %v", p.StaleAfter, p.ForgetAfter)
	case p.ForgetAfter < p.StaleAfter:
		c.add("forget_after must be >= stale_after, got %v (stale_after %v)", p.ForgetAfter, p.StaleAfter)
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
