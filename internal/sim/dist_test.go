package sim

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

func TestDistSample(t *testing.T) {
	for _, tc := range []struct {
		yaml           string
		lo, hi         int
		meanLo, meanHi float64
	}{
		{"42", 42, 42, 42, 42},
		{"{dist: uniform, min: 10, max: 20}", 10, 20, 14.8, 15.2},
		{"{dist: exp, mean: 100, max: 2000}", 0, 2000, 97, 103},
		{"{dist: normal, mean: 100, stddev: 10, min: 80, max: 120}", 80, 120, 99, 101},
		{"{dist: lognormal, median: 100, sigma: 0.5, max: 1000}", 0, 1000, 110, 116}, // mean = 100*e^(0.125) = 113.3
	} {
		var d Dist
		if err := yaml.Unmarshal([]byte(tc.yaml), &d); err != nil {
			t.Fatalf("%s: %v", tc.yaml, err)
		}
		if err := d.Validate(); err != nil {
			t.Fatalf("%s: %v", tc.yaml, err)
		}
		rng := rand.New(rand.NewPCG(1, 2))
		sum := 0.0
		const n = 20000
		for range n {
			v := d.Sample(rng)
			if v < tc.lo || v > tc.hi {
				t.Fatalf("%s: sample %d outside [%d, %d]", tc.yaml, v, tc.lo, tc.hi)
			}
			sum += float64(v)
		}
		if m := sum / n; m < tc.meanLo || m > tc.meanHi {
			t.Errorf("%s: mean %.2f outside [%v, %v]", tc.yaml, m, tc.meanLo, tc.meanHi)
		}
	}
}

func TestDistValidate(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"{dist: gamma}", "want const, uniform"},
		{"{dist: uniform, min: 5}", "needs max"},
		{"{dist: uniform, min: 5, max: 1}", "min 5 > max 1"},
		{"{dist: exp}", "needs mean"},
		{"{dist: lognormal, sigma: 1}", "needs median"},
		{"-3", "finite and >= 0"},
	} {
		var d Dist
		if err := yaml.Unmarshal([]byte(tc.yaml), &d); err != nil {
			t.Fatalf("%s: %v", tc.yaml, err)
		}
		if err := d.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.yaml, err, tc.want)
		}
	}
}

func TestZipf(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	z := newZipf(100, 1.0)
	counts := make([]int, 100)
	const n = 100000
	for range n {
		counts[z.sample(rng)]++
	}
	h := 0.0
	for k := 1; k <= 100; k++ {
		h += 1 / float64(k)
	}
	for _, k := range []int{0, 1, 9, 99} {
		want := n / (float64(k+1) * h)
		if got := float64(counts[k]); math.Abs(got-want) > 4*math.Sqrt(want)+1 {
			t.Errorf("rank %d: %v draws, want about %.0f", k, got, want)
		}
	}
	u := newZipf(4, 0) // uniform
	for k, c := range u.cdf {
		if math.Abs(c-float64(k+1)/4) > 1e-12 {
			t.Fatalf("zipf s=0 cdf %v", u.cdf)
		}
	}
}
