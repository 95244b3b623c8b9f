package sim

import (
	"fmt"
	"slices"
	"sync"
	"time"
)

// PDSummary is one variant's medians over seeds (each field the median of
// that field of the runs, not a field of the median run). A plain value.
type PDSummary struct {
	Variant, Decider string
	Seeds            []uint64
	Runs             []*PDRun
	// RemoteShare is Remote / Requests.
	RemoteShare                                     float64
	TTFTP50Ms, TTFTP99Ms, TTFTMeanMs                float64
	ExcessP99Ms, OwnP99Ms                           float64
	TPOTP50Ms, TPOTMeanMs, TPOTP99Ms, NominalTPOTMs float64
	StallMsPerToken, StalledShare, SlotWaitP99Ms    float64
	PrefillBusy, LocalBusy                          float64
}

// RunPDSeeds runs every variant of sc (or those named) once per seed,
// parallel runs at a time, and returns one summary per variant in the
// scenario's order.
func RunPDSeeds(sc *PDScenario, variants []string, seeds []uint64, duration time.Duration, parallel int) ([]PDSummary, error) {
	var names []string
	for _, v := range sc.Variants {
		if len(variants) == 0 || slices.Contains(variants, v.Name) {
			names = append(names, v.Name)
		}
	}
	for _, n := range variants {
		if !slices.Contains(names, n) {
			return nil, fmt.Errorf("scenario %s has no variant %q", sc.Name, n)
		}
	}
	if len(seeds) == 0 {
		seeds = []uint64{sc.Seed}
	}
	runs := make([][]*PDRun, len(names))
	errs := make([]error, len(names)*len(seeds))
	sem := make(chan struct{}, max(1, parallel))
	var wg sync.WaitGroup
	for i, name := range names {
		runs[i] = make([]*PDRun, len(seeds))
		for j, seed := range seeds {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				runs[i][j], errs[i*len(seeds)+j] = RunPD(sc, name, RunOptions{Seed: seed, Duration: duration})
			}()
		}
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	out := make([]PDSummary, len(names))
	for i, name := range names {
		rs := runs[i]
		med := func(f func(*PDRun) float64) float64 {
			v := make([]float64, len(rs))
			for k, r := range rs {
				v[k] = f(r)
			}
			return pdMedian(v)
		}
		out[i] = PDSummary{Variant: name, Decider: sc.PD.decider(name), Seeds: seeds, Runs: rs,
			RemoteShare:     med(func(r *PDRun) float64 { return float64(r.Remote) / float64(max(r.Requests, 1)) }),
			TTFTP50Ms:       med(func(r *PDRun) float64 { return r.TTFTP50Ms }),
			TTFTP99Ms:       med(func(r *PDRun) float64 { return r.TTFTP99Ms }),
			TTFTMeanMs:      med(func(r *PDRun) float64 { return r.TTFTMeanMs }),
			ExcessP99Ms:     med(func(r *PDRun) float64 { return r.ExcessP99Ms }),
			OwnP99Ms:        med(func(r *PDRun) float64 { return r.OwnP99Ms }),
			TPOTP50Ms:       med(func(r *PDRun) float64 { return r.TPOTP50Ms }),
			TPOTMeanMs:      med(func(r *PDRun) float64 { return r.TPOTMeanMs }),
			TPOTP99Ms:       med(func(r *PDRun) float64 { return r.TPOTP99Ms }),
			NominalTPOTMs:   med(func(r *PDRun) float64 { return r.NominalTPOTMs }),
			StallMsPerToken: med(func(r *PDRun) float64 { return r.StallMsPerToken }),
			StalledShare:    med(func(r *PDRun) float64 { return r.StalledShare }),
			SlotWaitP99Ms:   med(func(r *PDRun) float64 { return r.SlotWaitP99Ms }),
			PrefillBusy:     med(func(r *PDRun) float64 { return r.PrefillBusy }),
			LocalBusy:       med(func(r *PDRun) float64 { return r.LocalBusy }),
		}
	}
	return out, nil
}

// pdMedian is the median of v (the mean of the middle two for an even
// count); v is sorted in place. 0 when empty.
func pdMedian(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	slices.Sort(v)
	n := len(v)
	if n%2 == 1 {
		return v[n/2]
	}
	return (v[n/2-1] + v[n/2]) / 2
}
