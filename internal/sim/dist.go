package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"

	"go.yaml.in/yaml/v3"
)

// Dist is a distribution of non-negative integers (token counts, turns). In
// a scenario file it is a number (a constant) or a mapping with "dist" and
// its parameters:
//
//	500                                      # always 500
//	{dist: uniform, min: 50, max: 300}       # integers in [min, max]
//	{dist: exp, mean: 200}                   # exponential
//	{dist: normal, mean: 100, stddev: 20}
//	{dist: lognormal, median: 1000, sigma: 0.6}
//
// Every kind accepts min and max, which clamp the sample; samples are
// rounded to the nearest integer and never negative. A Dist is a plain
// value, safe for concurrent use (the RNG passed to Sample is not).
type Dist struct {
	Kind   string  `yaml:"dist" json:"dist"`
	Value  float64 `yaml:"value,omitempty" json:"value,omitempty"`
	Min    float64 `yaml:"min,omitempty" json:"min,omitempty"`
	Max    float64 `yaml:"max,omitempty" json:"max,omitempty"`
	Mean   float64 `yaml:"mean,omitempty" json:"mean,omitempty"`
	StdDev float64 `yaml:"stddev,omitempty" json:"stddev,omitempty"`
	Median float64 `yaml:"median,omitempty" json:"median,omitempty"`
	Sigma  float64 `yaml:"sigma,omitempty" json:"sigma,omitempty"`
}

// Const returns the distribution that is always v.
func Const(v float64) Dist { return Dist{Kind: "const", Value: v} }

// UnmarshalYAML accepts a bare number as a constant.
func (d *Dist) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		v, err := strconv.ParseFloat(n.Value, 64)
		if err != nil {
			return fmt.Errorf("line %d: distribution %q: want a number or a mapping with \"dist\"", n.Line, n.Value)
		}
		*d = Const(v)
		return nil
	}
	type plain Dist
	var p plain
	if err := n.Decode(&p); err != nil {
		return err
	}
	*d = Dist(p)
	return nil
}

// IsZero reports whether d was left out of the scenario.
func (d Dist) IsZero() bool { return d == Dist{} }

// Validate checks the kind and its parameters.
func (d Dist) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("distribution %s: %s", d.Kind, fmt.Sprintf(format, args...))
	}
	for _, v := range []float64{d.Value, d.Min, d.Max, d.Mean, d.StdDev, d.Median, d.Sigma} {
		if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			return bad("parameters must be finite and >= 0")
		}
	}
	if d.Max > 0 && d.Min > d.Max {
		return bad("min %v > max %v", d.Min, d.Max)
	}
	switch d.Kind {
	case "const":
	case "uniform":
		if d.Max == 0 {
			return bad("needs max")
		}
	case "exp":
		if d.Mean <= 0 {
			return bad("needs mean > 0")
		}
	case "normal":
		if d.Mean <= 0 {
			return bad("needs mean > 0")
		}
	case "lognormal":
		if d.Median <= 0 {
			return bad("needs median > 0")
		}
	default:
		return fmt.Errorf("distribution kind %q: want const, uniform, exp, normal or lognormal", d.Kind)
	}
	return nil
}

// Sample draws one value. The zero Dist gives 0 without using rng.
func (d Dist) Sample(rng *rand.Rand) int {
	var v float64
	switch d.Kind {
	case "", "const":
		v = d.Value
	case "uniform":
		lo, hi := math.Round(d.Min), math.Round(d.Max)
		return int(lo) + rng.IntN(int(hi-lo)+1)
	case "exp":
		v = rng.ExpFloat64() * d.Mean
	case "normal":
		v = d.Mean + rng.NormFloat64()*d.StdDev
	case "lognormal":
		v = d.Median * math.Exp(rng.NormFloat64()*d.Sigma)
	}
	if v < d.Min {
		v = d.Min
	}
	if d.Max > 0 && v > d.Max {
		v = d.Max
	}
	return int(math.Round(max(v, 0)))
}

// zipf draws ranks 0..n-1 with P(k) proportional to 1/(k+1)^s, for any s >=
// 0 (s = 0 is uniform), by binary search of the cumulative weights. Unlike
// math/rand/v2's Zipf it accepts s <= 1, the usual range for prompt
// popularity. Not safe for concurrent use with the same rng.
type zipf struct {
	cdf []float64
}

func newZipf(n int, s float64) *zipf {
	z := &zipf{cdf: make([]float64, n)}
	sum := 0.0
	for k := range n {
		sum += math.Pow(float64(k+1), -s)
		z.cdf[k] = sum
	}
	for k := range z.cdf {
		z.cdf[k] /= sum
	}
	return z
}

func (z *zipf) sample(rng *rand.Rand) int {
	u := rng.Float64()
	k, _ := slices.BinarySearch(z.cdf, u)
	return min(k, len(z.cdf)-1)
}
