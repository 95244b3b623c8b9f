package sim

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/prefixroute/prefixroute/scheduler"
)

// evPDTransfer: a remote prefill's KV reaches its decode instance.
const evPDTransfer eventKind = 100

// pdReq is one request's path through a disaggregated fleet.
type pdReq struct {
	r       *Request
	decode  int  // the router's decode instance
	prefill int  // the instance that prefills it (decode when local)
	remote  bool // prefilled on another instance
	// routerRemote is the router's own decision; pdReason its reason.
	routerRemote bool
	pdReason     scheduler.PDReason
	transfer     uint32 // tokens moved to the decode instance
	decodeStart  time.Duration
	decodeEnd    time.Duration // moves later with every stall
	stall        time.Duration // added by prefill batches on the decode instance
	done         bool
	// With a batch-dependent step (PDSpec.DecodeMsPerRunning > 0):
	// left is the decode steps still to run, frozen the end of the stalls
	// put on it (pd_decode.go).
	left   float64
	frozen time.Duration
}

// pdSlots is one instance's decoding: running requests and those waiting
// for a slot, in arrival order.
type pdSlots struct {
	running []*pdReq
	waiting []*pdReq
	head    int
	at      time.Duration // the running decodes' left is as of at (pd_decode.go)
}

// pdEngine runs one variant of a PDScenario: the engine's fleet, workload
// and routers, with roles, prefill decisions, KV transfers, decode slots
// and decode interference. Not safe for concurrent use.
type pdEngine struct {
	*engine
	sc      *PDScenario
	roles   []scheduler.Role
	decider string
	reqs    map[uint64]*pdReq
	slots   []pdSlots
	done    []*pdReq
	busyEnd []time.Duration // each instance's busy time at the end of the arrivals
}

// RunPD simulates one variant of a PD scenario in virtual time and returns
// what it measured. Deterministic for a scenario, variant and seed; every
// variant sees the same requests. Safe for concurrent use on a shared
// PDScenario.
func RunPD(sc *PDScenario, variant string, opts RunOptions) (*PDRun, error) {
	rc, err := sc.variantConfig(variant)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	base, closeWorkload, err := newVirtualEngine(rc, opts)
	if err != nil {
		return nil, err
	}
	defer closeWorkload()
	e := &pdEngine{engine: base, sc: sc, roles: sc.roles(), decider: sc.PD.decider(variant),
		reqs: make(map[uint64]*pdReq), slots: make([]pdSlots, len(base.insts))}
	for k, in := range e.insts {
		if e.roles[k] == scheduler.RoleDecode && sc.PD.DecodePrefillTokensPerSecond > 0 {
			spec := *in.spec
			spec.PrefillTokensPerSecond = sc.PD.DecodePrefillTokensPerSecond
			in.spec = &spec
		}
	}
	if err := e.start(); err != nil {
		return nil, err
	}
	for e.q.Len() > 0 {
		if err := e.handlePD(e.q.pop()); err != nil {
			return nil, err
		}
	}
	return e.result(variant, time.Since(start)), nil
}

// start sends the first reports (with roles) and schedules the first
// events, as engine.start does.
func (e *pdEngine) start() error {
	for k := range e.insts {
		if err := e.reportPD(k); err != nil {
			return err
		}
		phase := e.rc.reportInterval * time.Duration(k+1) / time.Duration(len(e.insts))
		e.q.push(event{at: phase, kind: evReport, inst: int32(k)})
	}
	for i := 1; i < len(e.rc.weights) && e.rc.weights[i].At.D() < e.end; i++ {
		e.q.push(event{at: e.rc.weights[i].At.D(), kind: evWeights, inst: int32(i)})
	}
	e.m.weightChange(0, e.rc.weights[0].Weights)
	e.q.push(event{at: time.Second, kind: evTick})
	return e.nextArrival()
}

// handlePD fires one event; weights and ticks are the engine's.
func (e *pdEngine) handlePD(ev event) error {
	e.now = ev.at
	switch ev.kind {
	case evArrival:
		if err := e.dispatchPD(ev.req); err != nil {
			return err
		}
		return e.nextArrival()
	case evBatchDone:
		e.batchDonePD(int(ev.inst))
	case evPDTransfer:
		e.transferDone(int(ev.inst), e.reqs[ev.req.ID])
	case evDecodeDone:
		e.decodeDonePD(int(ev.inst), e.reqs[ev.req.ID])
	case evReport:
		if err := e.reportPD(int(ev.inst)); err != nil {
			return err
		}
		if next := ev.at + e.rc.reportInterval; next < e.end {
			e.q.push(event{at: next, kind: evReport, inst: ev.inst})
		}
	case evTick:
		if ev.at == e.end {
			e.busyEnd = make([]time.Duration, len(e.insts))
			for k, in := range e.insts {
				e.busyEnd[k] = in.busyAt(e.now)
			}
		}
		return e.handle(ev)
	default:
		return e.handle(ev)
	}
	return nil
}

// reportPD sends instance k's load, with its role, to every router. As
// vLLM's num_requests_running, its running requests are those in the
// prefill batch plus those decoding in a slot; those waiting for a slot
// count as waiting.
func (e *pdEngine) reportPD(k int) error {
	in := e.insts[k]
	in.report(e.now, &e.rep)
	s := &e.slots[k]
	e.rep.RunningRequests = uint32(len(in.batch)*btoi(in.busy) + len(s.running))
	e.rep.WaitingRequests += uint32(len(s.waiting) - s.head)
	e.rep.Role = e.roles[k]
	for _, r := range e.routers {
		if err := r.report(e.now, k, &e.rep); err != nil {
			return fmt.Errorf("report of %s at %v: %w", e.insts[k].ID, e.now, err)
		}
	}
	return nil
}

// dispatchPD routes r (the router picks the decode instance and decides
// the prefill), applies the variant's decider and queues the prefill.
func (e *pdEngine) dispatchPD(r *Request) error {
	r.Router = e.nextR
	e.nextR = (e.nextR + 1) % len(e.routers)
	r.TargetMs = e.rc.sc.Workload.TTFTSLOMs
	sr := e.routers[r.Router].(*stateRouter)
	k, err := sr.pick(e.now, r)
	if err != nil {
		if errors.Is(err, scheduler.ErrNoEligibleInstance) || errors.Is(err, scheduler.ErrAllWeightsZero) ||
			errors.Is(err, scheduler.ErrSLOUnattainable) || errors.Is(err, scheduler.ErrSaturated) ||
			errors.Is(err, scheduler.ErrNoPrefillInstance) || errors.Is(err, scheduler.ErrPrefillSaturated) {
			e.m.reject(r)
			return nil
		}
		return fmt.Errorf("pick of request %d at %v: %w", r.ID, e.now, err)
	}
	d := &sr.out.Decision
	p, sp := pdPrefill(e.decider, sr, r.PromptTokens)
	pr := &pdReq{r: r, decode: k, prefill: k, pdReason: d.PD.Reason, routerRemote: d.PD.Disaggregated()}
	if p >= 0 {
		pr.prefill, pr.remote = p, true
	}
	if pr.remote != pr.routerRemote || (pr.remote && sp != d.PD.Prefill) {
		// A decider overrode the router: charge the work where it runs.
		if sp < 0 {
			sp = d.Instance
		}
		// Prefill work only: the pick's KV blocks stay charged to the
		// decode instance, where the KV lives.
		sr.pool.Assign(e.insts[pr.prefill].ID, uint64(d.Instances[sp].WorkTokens), 0, r.Hashes)
	}
	e.reqs[r.ID] = pr
	e.enqueue(pr.prefill, r)
	return nil
}

// batchDonePD completes instance k's batch: local prefills wait for a
// decode slot there, remote ones start their KV transfer.
func (e *pdEngine) batchDonePD(k int) {
	in := e.insts[k]
	for _, r := range in.finishBatch(e.now) {
		e.m.served(r, in)
		pr := e.reqs[r.ID]
		if !pr.remote {
			e.admit(k, pr)
			continue
		}
		// The prefill instance keeps the blocks in its cache but holds no
		// KV for decoding.
		in.decoding--
		in.activeBlocks -= len(r.Hashes) + len(r.DecodeHashes)
		d := e.insts[pr.decode]
		pr.transfer = uncached(r.PromptTokens, d.cache.Match(r.Hashes), d.bs)
		e.q.push(event{at: e.now + e.sc.PD.transfer(pr.transfer), kind: evPDTransfer, inst: int32(pr.decode), req: r})
	}
	e.startBatchPD(k)
}

// startBatchPD starts instance k's next batch; a batch of T stalls every
// decode running on k by κ·T.
func (e *pdEngine) startBatchPD(k int) {
	end, ok := e.insts[k].startBatch(e.now)
	if !ok {
		return
	}
	e.q.push(event{at: end, kind: evBatchDone, inst: int32(k)})
	stall := time.Duration(*e.sc.PD.DecodeInterference * float64(end-e.now))
	if e.batched() {
		e.stallBatched(k, stall)
		return
	}
	for _, pr := range e.slots[k].running {
		pr.decodeEnd += stall
		pr.stall += stall
	}
}

// enqueue queues r's prefill on instance k, starting a batch when idle.
func (e *pdEngine) enqueue(k int, r *Request) {
	r.Instance, r.queued = k, e.now
	e.hindsight(k, r)
	if e.insts[k].enqueue(r) {
		e.startBatchPD(k)
	}
}

// transferDone lands pr's KV on its decode instance k: the blocks enter
// its cache and hold KV there; then it waits for a decode slot.
func (e *pdEngine) transferDone(k int, pr *pdReq) {
	in := e.insts[k]
	r := pr.r
	for j := len(r.Hashes) - 1; j >= 0; j-- {
		in.store(r.Hashes[j])
	}
	in.decoding++
	in.activeBlocks += len(r.Hashes) + len(r.DecodeHashes)
	e.admit(k, pr)
}

// admit starts pr's decode on instance k when a slot is free, else queues
// it for one.
func (e *pdEngine) admit(k int, pr *pdReq) {
	s := &e.slots[k]
	if len(s.running) >= e.sc.PD.DecodeSlots {
		s.waiting = append(s.waiting, pr)
		return
	}
	pr.decodeStart = e.now
	if e.batched() {
		e.admitBatched(k, pr)
		return
	}
	pr.decodeEnd = e.now + e.insts[k].decodeTime(pr.r)
	s.running = append(s.running, pr)
	e.q.push(event{at: pr.decodeEnd, kind: evDecodeDone, inst: int32(k), req: pr.r})
}

// decodeDonePD ends pr's decode on instance k unless a stall moved its end
// later (then it fires again at the new end), and admits the next waiter.
func (e *pdEngine) decodeDonePD(k int, pr *pdReq) {
	if e.batched() {
		// Every move of the end pushed its own event: drop the stale ones.
		if pr.done || pr.decodeEnd != e.now {
			return
		}
		e.advance(k)
	} else if pr.decodeEnd > e.now {
		e.q.push(event{at: pr.decodeEnd, kind: evDecodeDone, inst: int32(k), req: pr.r})
		return
	}
	s := &e.slots[k]
	if i := slices.Index(s.running, pr); i >= 0 {
		s.running = slices.Delete(s.running, i, i+1)
	}
	e.insts[k].decodeDone(pr.r)
	pr.done = true
	e.done = append(e.done, pr)
	if s.head < len(s.waiting) {
		next := s.waiting[s.head]
		s.waiting[s.head] = nil
		s.head++
		if s.head == len(s.waiting) {
			s.waiting, s.head = s.waiting[:0], 0
		}
		e.admit(k, next)
	} else if e.batched() {
		e.reschedule(k) // one fewer decoding: the others' steps are shorter
	}
}
