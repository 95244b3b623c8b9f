package readiness

import (
	"fmt"
	"math"
)

// Live is the caller's view of its pool as it is now, which Status combines
// with the recorded window. Status calls it without holding the Tracker's
// mutex, so an implementation may take its own locks (and may call Record
// concurrently). It must be safe for use by the goroutine calling Status.
type Live interface {
	// Deployments appends one LiveDeployment per deployment of the pool now
	// to dst and returns the extended slice.
	Deployments(dst []LiveDeployment) []LiveDeployment
	// Depth returns the longest prefix of hashes, in blocks from the first,
	// cached on one eligible instance of deployment now (0 for a deployment
	// it does not know). hashes must not be kept after Depth returns.
	Depth(hashes []uint64, deployment string) int
}

// LiveDeployment is one deployment as the pool has it now. It is a plain
// value. Status reads NaN, infinite or negative figures as 0.
type LiveDeployment struct {
	Name string
	// Weight is the operator weight in force (≥ 0).
	Weight float64
	// Instances counts the deployment's eligible instances now.
	Instances int
	// PrefillTokensPerSecond is the reported prefill throughput summed over
	// those instances, in tokens/s.
	PrefillTokensPerSecond float64
	// PrefillRole counts its instances of role prefill (disaggregated
	// prefill, issue 30), eligible or not; PrefillEligible those of them
	// among Instances.
	PrefillRole, PrefillEligible int
}

// Query selects a migration for Status: moving traffic From one deployment
// To another. It is a plain value.
type Query struct {
	// From is the deployment to retire (its weight would go to 0), To the
	// one that is to take its traffic. Both required and different.
	From, To string
	// TopK is how many hot prefixes cached only on From to list. Default
	// (0) 10, at most MaxTopK.
	TopK int
}

// Query limits.
const (
	DefaultTopK = 10
	MaxTopK     = 100
)

// check returns q with its defaults, or an error wrapping ErrInvalidQuery or
// ErrSameDeployment.
func (q Query) check() (Query, error) {
	switch {
	case q.From == "":
		return q, fmt.Errorf("%w: from is empty", ErrInvalidQuery)
	case q.To == "":
		return q, fmt.Errorf("%w: to is empty", ErrInvalidQuery)
	case q.From == q.To:
		return q, fmt.Errorf("%w: %q", ErrSameDeployment, q.From)
	case q.TopK < 0 || q.TopK > MaxTopK:
		return q, fmt.Errorf("%w: top_k must be in [0, %d] (0 means %d), got %d", ErrInvalidQuery, MaxTopK, DefaultTopK, q.TopK)
	}
	if q.TopK == 0 {
		q.TopK = DefaultTopK
	}
	return q, nil
}

// nonNeg returns x, or 0 when x is NaN, infinite or negative.
func nonNeg(x float64) float64 {
	if x >= 0 && x <= math.MaxFloat64 {
		return x
	}
	return 0
}

// finite reports whether x is neither NaN nor infinite.
func finite(x float64) bool { return x-x == 0 }

// ratio returns num/den, or 0 when den is 0 (or the result is not finite).
func ratio(num, den float64) float64 {
	if den == 0 {
		return 0
	}
	return nonNeg(num / den)
}
