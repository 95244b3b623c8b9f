package main

import (
	"bytes"
	"slices"
	"strings"
	"testing"
)

func TestPDCommand(t *testing.T) {
	var out, errb bytes.Buffer
	code := run([]string{"pd", "--seeds", "1,2", "--duration", "40s", "../../internal/sim/testdata/pd-mooncake.yaml"}, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	for _, want := range []string{"seeds [1 2], medians", "| ours | router |", "| always | always | 100 % |",
		"| llm-d | llmd |", "| dynamo | dynamo |", "aim (TTFT p99 ≤ 0.8 × the best baseline"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"pd"}, "pd: name one pd scenario file"},
		{[]string{"pd", "--seeds", "5-1", "x.yaml"}, `--seeds: "5-1": want a range lo-hi with lo ≤ hi`},
		{[]string{"pd", "nope.yaml"}, "no such file"},
		{[]string{"pd", "--variants", "ours,nope", "../../internal/sim/testdata/pd-mooncake.yaml"}, `has no variant "nope"`},
	} {
		out.Reset()
		errb.Reset()
		if code := run(c.args, &out, &errb); code != 1 || !strings.Contains(errb.String(), c.want) {
			t.Errorf("%v: exit %d, stderr %q; want 1 and %q", c.args, code, errb.String(), c.want)
		}
	}
}

func TestParseSeeds(t *testing.T) {
	cases := []struct {
		in   string
		want []uint64
		err  string
	}{
		{"", nil, ""},
		{"1-5", []uint64{1, 2, 3, 4, 5}, ""},
		{"3, 1,7-8", []uint64{3, 1, 7, 8}, ""},
		{"0", nil, "want seeds ≥ 1"},
		{"a", nil, "want seeds ≥ 1"},
		{"2-x", nil, "want a range"},
		{"1-1000", slices.Collect(func(yield func(uint64) bool) {
			for v := uint64(1); v <= 1000; v++ {
				if !yield(v) {
					return
				}
			}
		}), ""},
		{"1-1001", nil, "at most 1000 seeds"},
	}
	for _, c := range cases {
		got, err := parseSeeds(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: error %v, want %q", c.in, err, c.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("%q: %v, %v; want %v", c.in, got, err, c.want)
		}
	}
}
