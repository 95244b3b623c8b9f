package sim

import (
	"fmt"
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
