package console

import "testing"

// TestLoneSurrogate: the offset of the first escape of half a surrogate
// pair inside a string, or -1.
func TestLoneSurrogate(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int
	}{
		{`{"a":"b"}`, -1},
		{`"\ud800"`, 1},
		{`"\uDBFF"`, 1},
		{`"\udc00"`, 1},
		{`"x\ud83d\ude00y"`, -1},
		{`"\ud83d\ude00\ud83d"`, 13},
		{`"\ud800\n"`, 1},
		{`"\ud800\u0041"`, 1},
		{`"\ud800\udc0"`, 1}, // a truncated low half
		{`"\\ud800"`, -1},    // an escaped backslash, then text
		{`"\\\ud800"`, 3},    // an escaped backslash, then a lone half
		{`"\"\ud800"`, 3},    // an escaped quote does not end the string
		{`{"\u0041":"\u00e9"}`, -1},
		{`\ud800`, -1}, // outside a string: the decoder's business
		{`"\ud8`, -1},  // malformed: the decoder's business
		{`"\uZZZZ"`, -1},
	} {
		if got := loneSurrogate([]byte(tc.in)); got != tc.want {
			t.Errorf("loneSurrogate(%s) = %d, want %d", tc.in, got, tc.want)
		}
	}
}
