package main

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// maxTokens bounds --tokens: far more than any prompt (prefixhash stops at
// 8192 blocks), small enough that a typo cannot exhaust memory.
const maxTokens = 1 << 22

// parseHashes parses "h1,h2,..." (decimal or 0x-hex uint64s; spaces and
// empty items ignored).
func parseHashes(s string) ([]uint64, error) {
	var out []uint64
	for _, f := range splitList(s) {
		h, err := strconv.ParseUint(f, 0, 64)
		if err != nil {
			return nil, fmt.Errorf("hash %q: want a 64-bit number, decimal or 0x-hex", f)
		}
		out = append(out, h)
	}
	return out, nil
}

// parseTokens parses token ids "1,2,3" and inclusive ranges "0-63".
func parseTokens(s string) ([]uint32, error) {
	var out []uint32
	for _, f := range splitList(s) {
		lo, hi, isRange := strings.Cut(f, "-")
		a, err := strconv.ParseUint(lo, 0, 32)
		if err != nil {
			return nil, fmt.Errorf("token %q: want a token id (0..4294967295) or a range like 0-63", f)
		}
		b := a
		if isRange {
			if b, err = strconv.ParseUint(hi, 0, 32); err != nil || b < a {
				return nil, fmt.Errorf("token range %q: want FIRST-LAST with FIRST <= LAST", f)
			}
		}
		if uint64(len(out))+b-a+1 > maxTokens {
			return nil, fmt.Errorf("more than %d tokens", maxTokens)
		}
		for t := a; t <= b; t++ {
			out = append(out, uint32(t))
		}
	}
	return out, nil
}

// splitList splits a comma- or space-separated list.
func splitList(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\n' || r == '\t' })
}

// parseWeights parses DEPLOYMENT=WEIGHT arguments.
func parseWeights(args []string) (map[string]float64, error) {
	if len(args) == 0 {
		return nil, fmt.Errorf("no weights given; name every deployment as DEPLOYMENT=WEIGHT")
	}
	out := make(map[string]float64, len(args))
	for _, a := range args {
		dep, w, ok := strings.Cut(a, "=")
		if !ok || dep == "" {
			return nil, fmt.Errorf("%q: want DEPLOYMENT=WEIGHT", a)
		}
		if _, dup := out[dep]; dup {
			return nil, fmt.Errorf("deployment %q given twice", dep)
		}
		v, err := strconv.ParseFloat(w, 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			return nil, fmt.Errorf("%q: weight %q is not a finite number >= 0", a, w)
		}
		out[dep] = v
	}
	return out, nil
}
