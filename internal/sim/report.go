package sim

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sync"
	"time"
)

// ScenarioOptions adjusts RunScenario.
type ScenarioOptions struct {
	// Seed and Duration as in RunOptions.
	Seed     uint64
	Duration time.Duration
	// Variants restricts the run to these variant names; empty: all.
	Variants []string
	// Parallel is how many variants run at once. Default 1.
	Parallel int
	// Progress is called with the virtual time simulated so far, summed
	// over the variants, and the total; calls are serialised.
	Progress func(done, total time.Duration)
	// RouteDelays as in RunOptions, for every variant.
	RouteDelays map[uint64]time.Duration
	LiveDraws   bool
}

// RunScenario runs the scenario's variants (on identical traffic) and
// returns their results in the scenario's order.
func RunScenario(sc *Scenario, opts ScenarioOptions) ([]*Result, error) {
	var names []string
	for _, v := range sc.Variants {
		if len(opts.Variants) == 0 || slices.Contains(opts.Variants, v.Name) {
			names = append(names, v.Name)
		}
	}
	for _, n := range opts.Variants {
		if !slices.ContainsFunc(sc.Variants, func(v Variant) bool { return v.Name == n }) {
			return nil, fmt.Errorf("scenario %s has no variant %q", sc.Name, n)
		}
	}
	dur := sc.Duration.D()
	if opts.Duration > 0 {
		dur = opts.Duration
	}
	var mu sync.Mutex
	done := make([]time.Duration, len(names))
	total := dur * time.Duration(len(names))
	results := make([]*Result, len(names))
	errs := make([]error, len(names))
	sem := make(chan struct{}, max(1, opts.Parallel))
	var wg sync.WaitGroup
	for i, name := range names {
		ro := RunOptions{Seed: opts.Seed, Duration: opts.Duration, RouteDelays: opts.RouteDelays, LiveDraws: opts.LiveDraws}
		if opts.Progress != nil {
			ro.Progress = func(d, _ time.Duration) {
				mu.Lock()
				defer mu.Unlock()
				done[i] = d
				sum := time.Duration(0)
				for _, v := range done {
					sum += v
				}
				opts.Progress(sum, total)
			}
		}
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			results[i], errs[i] = Run(sc, name, ro)
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("%s/%s: %w", sc.Name, names[i], err)
		}
	}
	return results, nil
}

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// fileName turns a variant name into a file name.
func fileName(s string) string { return unsafeName.ReplaceAllString(s, "_") }

// WriteReport writes a scenario's results under dir/<scenario>/: one CSV
// series per variant, summary.md (the tables), summary.json (the
// summaries), readiness.csv when a run has a readiness probe, and the PNG
// plots unless plots is false. It returns the files written.
func WriteReport(dir string, sc *Scenario, runs []*Result, plots bool) ([]string, error) {
	out := filepath.Join(dir, sc.Name)
	if err := os.MkdirAll(out, 0o755); err != nil {
		return nil, err
	}
	var files []string
	sums := make([]Summary, len(runs))
	for i, res := range runs {
		sums[i] = res.Summarise()
		path := filepath.Join(out, fileName(res.Variant.Name)+".csv")
		f, err := os.Create(path)
		if err != nil {
			return files, err
		}
		err = WriteCSV(f, res)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return files, err
		}
		files = append(files, path)
	}
	md, err := os.Create(filepath.Join(out, "summary.md"))
	if err != nil {
		return files, err
	}
	fmt.Fprintf(md, "# %s\n\n%s\n\n", sc.Name, sc.Description)
	err = WriteMarkdown(md, sc, sums)
	if cerr := md.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return files, err
	}
	files = append(files, md.Name())
	js, err := json.MarshalIndent(sums, "", "  ")
	if err != nil {
		return files, err
	}
	if err := os.WriteFile(filepath.Join(out, "summary.json"), js, 0o644); err != nil {
		return files, err
	}
	files = append(files, filepath.Join(out, "summary.json"))
	for _, res := range runs {
		if res.Live == nil {
			continue
		}
		path := filepath.Join(out, fileName(res.Variant.Name)+"-routes.csv")
		f, err := os.Create(path)
		if err != nil {
			return files, err
		}
		err = WriteRoutesCSV(f, res)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return files, err
		}
		files = append(files, path)
	}
	tail := filepath.Join(out, "tail.csv")
	tf, err := os.Create(tail)
	if err != nil {
		return files, err
	}
	err = WriteTailCSV(tf, runs)
	if cerr := tf.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return files, err
	}
	files = append(files, tail)
	if slices.ContainsFunc(runs, func(r *Result) bool { return r.Readiness != nil }) {
		path := filepath.Join(out, "readiness.csv")
		f, err := os.Create(path)
		if err != nil {
			return files, err
		}
		err = WriteReadinessCSV(f, runs)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return files, err
		}
		files = append(files, path)
	}
	if plots {
		pngs, err := WritePlots(out, sc, runs)
		files = append(files, pngs...)
		if err != nil {
			return files, err
		}
	}
	return files, nil
}
