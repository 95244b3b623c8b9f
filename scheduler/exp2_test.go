package scheduler

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestExp2Neg(t *testing.T) {
	const tol = 4 * 0x1p-52 // 4 ulp, relative
	check := func(x float64) {
		t.Helper()
		got, want := exp2neg(x), math.Exp2(x)
		if math.Abs(got-want) > tol*want {
			t.Fatalf("exp2neg(%v) = %v, math.Exp2 gives %v (%.2g ulp)", x, got, want, math.Abs(got-want)/want/0x1p-52)
		}
	}
	for k := 0; k >= -1022; k-- {
		if got, want := exp2neg(float64(k)), math.Ldexp(1, k); got != want {
			t.Fatalf("exp2neg(%d) = %v, want exactly %v", k, got, want)
		}
	}
	for j := range 64 * 40 {
		x := -float64(j) / 64
		check(x)
		check(math.Nextafter(x, -1))
		check(math.Nextafter(x, 1))
	}
	rng := rand.New(rand.NewPCG(1, 1))
	for range 200_000 {
		check(-rng.Float64() * 60)
		check(-rng.Float64() * 1022)
		check(-rng.ExpFloat64() * 1e-6)
	}
	for _, x := range []float64{math.Inf(-1), -1e300, -1022.0000001, -1100} {
		if got := exp2neg(x); got != 0 {
			t.Fatalf("exp2neg(%v) = %v, want 0", x, got)
		}
	}
	if got := exp2neg(math.Copysign(0, -1)); got != 1 {
		t.Fatalf("exp2neg(-0) = %v", got)
	}
}

var sink float64

func BenchmarkExp2(b *testing.B) {
	xs := make([]float64, 1024)
	rng := rand.New(rand.NewPCG(1, 1))
	for i := range xs {
		xs[i] = -30 * rng.Float64()
	}
	for _, bm := range []struct {
		name string
		f    func(float64) float64
	}{
		{"exp2neg", exp2neg},
		{"math.Exp2", math.Exp2},
		{"math.Exp", func(x float64) float64 { return math.Exp(x * math.Ln2) }},
	} {
		b.Run(bm.name, func(b *testing.B) {
			s := 0.0
			for b.Loop() {
				for _, x := range xs {
					s += bm.f(x)
				}
			}
			sink = s
		})
	}
}
