package simlive

import (
	"fmt"
	"sync"
	"time"

	"github.com/prefixroute/prefixroute/internal/sim"
	"github.com/prefixroute/prefixroute/pkg/client"
)

// loop runs the engine against the wall clock: events fire when the scaled
// clock reaches them, arrivals go to the gateway workers, and the workers'
// choices come back to be queued on the chosen instance at the time they
// arrive. It returns when every request has been served (or rejected), or
// at the deadline (Duration plus 30 s to drain), counting the unfinished.
func (lr *liveRun) loop(start time.Time) error {
	d, speed := lr.d, lr.opts.Speed
	virt := func() time.Duration { return time.Duration(float64(time.Since(start)) * speed) }
	work := make(chan *sim.Request, lr.opts.MaxRequests+1)
	inbox := make(chan routed, lr.opts.MaxRequests+1)
	dispatched, returned := 0, 0
	d.OnArrival(func(r *sim.Request) {
		dispatched++
		work <- r
	})
	var wg sync.WaitGroup
	for i := range lr.opts.Workers {
		rep := i % max(len(lr.pickers), 1) // workers spread over the replicas
		wg.Go(func() { lr.worker(rep, work, inbox, virt) })
	}
	defer func() {
		close(work)
		wg.Wait()
	}()
	if err := d.Start(); err != nil {
		return err
	}
	deadline := start.Add(lr.opts.Duration + 30*time.Second)
	timer := time.NewTimer(0)
	defer timer.Stop()
	var pending []routed
	for {
		if err := d.AdvanceTo(virt()); err != nil {
			return err
		}
		for _, m := range pending {
			lr.accept(m)
		}
		pending = pending[:0]
		if err := lr.publishAll(); err != nil {
			return err
		}
		next, more := d.Next()
		if !more && dispatched == returned {
			return nil
		}
		if time.Now().After(deadline) {
			lr.unfinished = d.Unfinished()
			return nil
		}
		wait := time.Second
		if more {
			wait = min(wait, time.Duration(float64(next-virt())/speed))
		}
		wait = min(wait, time.Until(lr.nextReport)) // the next reports are due then
		timer.Reset(max(wait, 0))
		select {
		case m := <-inbox:
			returned++
			pending = append(pending, m)
		case <-timer.C:
		case <-lr.ctx.Done():
			return lr.ctx.Err()
		}
	}
}

// worker is one gateway worker of replica rep: it asks the router where
// each request goes, with the workload's TTFT target (wall-clock ms), or
// the local baseline at the virtual time virt gives.
func (lr *liveRun) worker(rep int, work <-chan *sim.Request, inbox chan<- routed, virt func() time.Duration) {
	if lr.local != nil {
		for r := range work {
			t := time.Now()
			k, err := lr.local.Pick(virt(), r)
			inbox <- routed{r: r, inst: k, err: err, lat: time.Since(t)}
		}
		return
	}
	picker := lr.pickers[rep]
	for r := range work {
		seed := r.ID + 1
		r.TargetMs = lr.target
		t := time.Now()
		res, err := picker.Pick(lr.ctx, client.Request{Hashes: r.Hashes, PromptTokens: r.PromptTokens, Seed: &seed,
			RequestID: requestID(r.ID), TTFTSLOMs: lr.target / lr.opts.Speed})
		m := routed{r: r, inst: -1, rep: rep, err: err, lat: time.Since(t)}
		if err == nil {
			k, ok := lr.index[res.InstanceID]
			if !ok {
				m.err = fmt.Errorf("router chose unknown instance %q", res.InstanceID)
			}
			m.inst = k
			lr.noteChoice(r, &res)
		}
		inbox <- m
	}
}

// accept queues a routed request on its instance, or records the failure.
func (lr *liveRun) accept(m routed) {
	lr.mu.Lock()
	lr.picks++
	lr.latencies = append(lr.latencies, float64(m.lat)/1e6)
	switch shedKind(m.err) {
	case 2:
		lr.shedSLO++
		fallthrough
	case 1:
		lr.shed++
	case 0:
		if m.err == nil {
			break
		}
		lr.errs++
		if lr.firstErr == "" {
			lr.firstErr = m.err.Error()
		}
	}
	lr.mu.Unlock()
	if m.err != nil {
		lr.d.Reject(m.r)
		return
	}
	lr.mu.Lock()
	lr.routeDelays = append(lr.routeDelays, float64(lr.d.Now()-m.r.Arrival)/1e6)
	lr.mu.Unlock()
	if lr.picked != nil {
		lr.picked[m.r.ID] = m.rep
	}
	lr.d.Queue(m.inst, m.r)
}
