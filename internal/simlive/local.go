package simlive

import (
	"context"
	"time"

	"github.com/prefixroute/prefixroute/internal/sim"
)

// localAddr is LiveStats.Addr of a run whose baseline picks in process.
const localAddr = "in-process"

// runLocal is RunLive for a baseline variant: the same loop, workers and
// emulated fleet, with the baseline l picking in this process instead of
// prefixrouted, fed every instance's report once per report interval
// (wall clock: the variant's interval over Speed, at least
// MinReportInterval, as a Reporter sends them).
func runLocal(ctx context.Context, d *sim.Driven, l *sim.LocalRouter, opts Options) (*sim.Result, error) {
	lr := &liveRun{d: d, insts: d.Instances(), opts: opts, ctx: ctx, local: l,
		reportEvery: ReportInterval(d.ReportInterval(), opts.Speed), index: make(map[string]int)}
	if err := l.SetWeights(d.FirstWeights(), 0); err != nil {
		return nil, err
	}
	d.OnWeights(l.SetWeights)
	for k, in := range lr.insts {
		lr.index[in.ID] = k
	}
	start := time.Now()
	if err := lr.loop(start); err != nil {
		return nil, err
	}
	wall := time.Since(start)
	res := d.Result(wall)
	res.Live = lr.stats()
	res.Live.Addr = localAddr
	return res, nil
}

// publishAll hands every instance's load and cache events to its
// Reporter (every call; the next due reportEvery later), or, for a local
// baseline, to the baseline once per reportEvery.
func (lr *liveRun) publishAll() error {
	now := time.Now()
	if lr.local == nil {
		for k := range lr.insts {
			lr.publish(k)
		}
		lr.nextReport = now.Add(lr.reportEvery)
		return nil
	}
	if now.Before(lr.nextReport) {
		return nil
	}
	lr.nextReport = lr.nextReport.Add(lr.reportEvery) // on a fixed schedule, as a Reporter's ticker
	if lr.nextReport.Before(now) {
		lr.nextReport = now.Add(lr.reportEvery) // late by more than an interval: skip, as a ticker drops ticks
	}
	for k := range lr.insts {
		lr.d.Report(k, &lr.rep)
		if err := lr.local.Report(lr.d.Now(), k, &lr.rep); err != nil {
			return err
		}
		lr.localReports++
	}
	return nil
}
