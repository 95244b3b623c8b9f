package scheduler

import "math"

// exp2Table holds 2^(j/64) for j = 0..63, each correctly rounded (computed
// with math/big at 300 bits).
var exp2Table = [64]float64{
	1, 1.0108892860517005, 1.0218971486541166, 1.0330248790212284,
	1.0442737824274138, 1.0556451783605572, 1.0671404006768237, 1.0787607977571199,
	1.0905077326652577, 1.102382583307841, 1.1143867425958924, 1.1265216186082418,
	1.1387886347566916, 1.1511892299529827, 1.1637248587775775, 1.1763969916502812,
	1.189207115002721, 1.202156731452703, 1.215247359980469, 1.22848053610687,
	1.241857812073484, 1.255380757024691, 1.2690509571917332, 1.2828700160787783,
	1.2968395546510096, 1.3109612115247644, 1.3252366431597413, 1.339667524053303,
	1.3542555469368927, 1.3690024229745905, 1.383909881963832, 1.3989796725383112,
	1.4142135623730951, 1.42961333839197, 1.4451808069770467, 1.460917794180647,
	1.4768261459394993, 1.4929077282912648, 1.5091644275934228, 1.5255981507445384,
	1.5422108254079407, 1.559004400237837, 1.5759808451078865, 1.593142151342267,
	1.6104903319492543, 1.6280274218573478, 1.645755478153965, 1.6636765803267364,
	1.681792830507429, 1.7001063537185235, 1.718619298122478, 1.7373338352737062,
	1.7562521603732995, 1.7753764925265212, 1.7947090750031072, 1.8142521755003989,
	1.8340080864093424, 1.8539791250833855, 1.8741676341103, 1.8945759815869656,
	1.9152065613971474, 1.9360617934922943, 1.9571441241754002, 1.978456026387951,
}

// exp2neg returns 2^x for x <= 0 (x not NaN), within 1.5 ulp of math.Exp2
// over 5 million random points (the tests allow 4), and exactly for integer
// x in [-1022, 0]. It returns 0 below -1022,
// where the exact value would be subnormal: a weight that small is 0 for
// every purpose of this package.
//
// It is the hot function of the softmax (one call per eligible instance);
// BenchmarkExp2 compares it with math.Exp2 and math.Exp. Method:
// x = q + j/64 + r with q integer, j in [0, 63] and r in (-1/64, 0], then
// 2^x = 2^q * 2^(j/64) * e^(r ln 2), the middle factor from the table and
// the last from its Taylor polynomial of degree 6 (|r ln 2| < 0.011, so the
// truncation error is below 4e-18).
func exp2neg(x float64) float64 {
	if !(x >= -1022) {
		return 0
	}
	t := x * 64                // exact: a power-of-two scaling
	n := int64(t)              // rounds toward zero, so n >= t > n-1
	r := (t - float64(n)) / 64 // exact (Sterbenz), in (-1/64, 0]
	q, j := n>>6, n&63         // n = 64q + j, 0 <= j < 64, q >= -1022
	y := r * math.Ln2
	p := 1 + y*(1+y*(1.0/2+y*(1.0/6+y*(1.0/24+y*(1.0/120+y*(1.0/720))))))
	return exp2Table[j] * p * math.Float64frombits(uint64(q+1023)<<52)
}
