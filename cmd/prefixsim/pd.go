package main

import (
	"flag"
	"fmt"
	"io"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/prefixroute/prefixroute/internal/sim"
	"github.com/prefixroute/prefixroute/internal/simout"
)

// pdCmd is "prefixsim pd": a disaggregated scenario's variants over seeds,
// medians printed as a Markdown table with the aim of issue 30.
func pdCmd(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("pd", flag.ContinueOnError)
	fs.SetOutput(stderr)
	seedsFlag := fs.String("seeds", "", "seeds: a list (1,2,3) or a range (1-5); default the scenario's seed")
	variants := fs.String("variants", "", "comma-separated variants to run (default all)")
	duration := fs.Duration("duration", 0, "override the duration (simulated)")
	parallel := fs.Int("parallel", runtime.GOMAXPROCS(0), "runs at once")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("pd: name one pd scenario file (e.g. internal/sim/testdata/pd-mooncake.yaml)")
	}
	seeds, err := parseSeeds(*seedsFlag)
	if err != nil {
		return fmt.Errorf("pd: --seeds: %w", err)
	}
	sc, err := sim.LoadPDScenario(fs.Arg(0))
	if err != nil {
		return err
	}
	var names []string
	if *variants != "" {
		names = strings.Split(*variants, ",")
	}
	start := time.Now()
	sums, err := sim.RunPDSeeds(sc, names, seeds, *duration, *parallel)
	if err != nil {
		return err
	}
	used := sums[0].Seeds
	fmt.Fprintf(stdout, "\n## %s (%d variants × seeds %v, medians; %v wall)\n\n", sc.Name, len(sums), used, time.Since(start).Round(time.Millisecond))
	if err := simout.WritePDMarkdown(stdout, sums); err != nil {
		return err
	}
	if a, ok := simout.CheckPDAim(sums); ok {
		fmt.Fprintf(stdout, "\n%s\n", a)
	}
	return nil
}

// parseSeeds parses "" (none), "1,2,3" or "1-5" (at most 1000 seeds, each
// ≥ 1).
func parseSeeds(s string) ([]uint64, error) {
	if s == "" {
		return nil, nil
	}
	var out []uint64
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(strings.TrimSpace(part), "-")
		a, err := strconv.ParseUint(lo, 10, 64)
		if err != nil || a == 0 {
			return nil, fmt.Errorf("%q: want seeds ≥ 1 as 1,2,3 or 1-5", part)
		}
		b := a
		if isRange {
			if b, err = strconv.ParseUint(hi, 10, 64); err != nil || b < a {
				return nil, fmt.Errorf("%q: want a range lo-hi with lo ≤ hi", part)
			}
		}
		if b-a >= 1000 || len(out)+int(b-a+1) > 1000 {
			return nil, fmt.Errorf("%q: at most 1000 seeds", part)
		}
		for v := a; v <= b; v++ {
			out = append(out, v)
		}
	}
	return out, nil
}
