package store

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"unicode"
	"unicode/utf8"
)

// Limits of the values SetWeights accepts.
const (
	// MaxWeight is the largest weight of a deployment.
	MaxWeight = 1e6
	// MaxDeployments is the largest number of deployments a pool's weights
	// may name.
	MaxDeployments = 256
	// MaxNameBytes is the longest pool or deployment name, in bytes.
	MaxNameBytes = 128
)

// ValidatePoolName reports whether name can name a pool: 1 to MaxNameBytes
// bytes of valid UTF-8, every character printable. The error wraps
// ErrInvalidName.
func ValidatePoolName(name string) error {
	if msg := checkName("pool", name); msg != "" {
		return invalid(msg, ErrInvalidName)
	}
	return nil
}

// ValidateWeights reports whether weights can be a pool's weights: 1 to
// MaxDeployments deployments, each named like a pool (see ValidatePoolName)
// and weighted by a finite number in [0, MaxWeight]. All weights 0 is valid
// (a full drain). The error wraps ErrInvalidWeights, and also ErrInvalidName
// for a bad deployment name. Deployments are checked in name order, so the
// error is deterministic.
func ValidateWeights(weights map[string]float64) error {
	switch n := len(weights); {
	case n == 0:
		return invalid(fmt.Sprintf("no deployments; want 1 to %d (set a deployment's weight to 0 to drain it)",
			MaxDeployments), ErrInvalidWeights)
	case n > MaxDeployments:
		return invalid(fmt.Sprintf("%d deployments; want at most %d", n, MaxDeployments), ErrInvalidWeights)
	}
	for _, d := range slices.Sorted(maps.Keys(weights)) {
		if msg := checkName("deployment", d); msg != "" {
			return invalid(msg, ErrInvalidWeights, ErrInvalidName)
		}
		w := weights[d]
		if math.IsNaN(w) || math.IsInf(w, 0) || w < 0 || w > MaxWeight {
			return invalid(fmt.Sprintf("weight of deployment %q is %s; want a finite number in [0, %s]",
				d, formatFloat(w), formatFloat(MaxWeight)), ErrInvalidWeights)
		}
	}
	return nil
}

// checkName returns why name cannot name a what, or "".
func checkName(what, name string) string {
	switch {
	case name == "":
		return fmt.Sprintf("%s name is empty; want 1 to %d bytes", what, MaxNameBytes)
	case len(name) > MaxNameBytes:
		return fmt.Sprintf("%s name %q is %d bytes; want at most %d", what, name, len(name), MaxNameBytes)
	case !utf8.ValidString(name):
		return fmt.Sprintf("%s name %q is not valid UTF-8", what, name)
	}
	for i, r := range name {
		if !unicode.IsPrint(r) {
			return fmt.Sprintf("%s name %q has the unprintable character %U at byte %d; want printable characters only",
				what, name, r, i)
		}
	}
	return ""
}

// allZero reports whether every weight is 0: the pool is fully drained.
func allZero(weights map[string]float64) bool {
	for _, w := range weights {
		if w != 0 {
			return false
		}
	}
	return true
}

// formatFloat formats f in the shortest form that reads back exactly:
// 1000000, 0.5, 1e+300, NaN, +Inf.
func formatFloat(f float64) string {
	if math.IsInf(f, 1) {
		return "+Inf"
	}
	if a := math.Abs(f); a != 0 && (a < 1e-6 || a >= 1e21) {
		return strconv.FormatFloat(f, 'g', -1, 64)
	}
	return strconv.FormatFloat(f, 'f', -1, 64)
}
