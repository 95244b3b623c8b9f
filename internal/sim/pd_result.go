package sim

import (
	"slices"
	"time"

	"github.com/prefixroute/prefixroute/scheduler"
)

// PDRun is what one run of a PD scenario's variant measured over the
// requests that arrived after the warmup and finished decoding. Times in
// ms. A plain value.
type PDRun struct {
	Variant, Decider string
	Seed             uint64
	// Requests finished; Rejected by the router (whole run).
	Requests, Rejected int
	// Remote were prefilled on a prefill instance; RouterRemote would
	// have been by the router's own decision.
	Remote, RouterRemote int
	// Reasons counts the router's prefill-stage reasons (PDReason.String;
	// "" when the drawn deployment had no prefill instance).
	Reasons map[string]int
	// TTFT: arrival to the first decode step on the decode instance
	// (prefill queue and batch, KV transfer, decode slot wait).
	TTFTP50Ms, TTFTP99Ms, TTFTMeanMs float64
	// ExcessP99Ms is the 99th percentile of TTFT less the request's own
	// prefill compute (its work at the throughput of the instance that
	// prefilled it): queueing, batch overheads, transfer and slot wait,
	// what routing can change. OwnP99Ms is the 99th percentile of that own
	// compute.
	ExcessP99Ms, OwnP99Ms float64
	// TPOT is each request's decode time over its output tokens (requests
	// with output); NominalTPOTMs its mean without stalls (decode_per_token:
	// with decode_ms_per_running, without the batch's growth either).
	TPOTP50Ms, TPOTMeanMs, TPOTP99Ms, NominalTPOTMs float64
	// StallMsPerToken is the decode interference: the mean over requests
	// of their stall (prefill batches on their decode instance) per output
	// token, ms; TPOT impact. StalledShare is the share of requests
	// stalled at all.
	StallMsPerToken, StalledShare float64
	// SlotWaitP99Ms is the 99th percentile wait for a decode slot.
	SlotWaitP99Ms float64
	// PrefillBusy is the prefill-role instances' busy share of the
	// arrivals' duration; LocalBusy that of the decode and both instances'
	// prefill engines.
	PrefillBusy, LocalBusy float64
	Wall                   time.Duration
	// Records are the finished requests after the warmup, in the order
	// they finished decoding.
	Records []PDRecord
}

// PDRecord is one finished request of a PD run. Times in ms.
type PDRecord struct {
	ID uint64
	// Decode and Prefill are the instances' ids (equal when local).
	Decode, Prefill string
	Remote          bool
	// Transfer is the tokens moved to the decode instance.
	Transfer                   uint32
	TTFTMs, SlotWaitMs, TPOTMs float64
	// OwnMs is its own prefill compute where it was prefilled.
	OwnMs   float64
	StallMs float64
}

// result summarises the finished requests.
func (e *pdEngine) result(variant string, wall time.Duration) *PDRun {
	seed := e.rc.sc.Seed
	if e.opts.Seed != 0 {
		seed = e.opts.Seed
	}
	out := &PDRun{Variant: variant, Decider: e.decider, Seed: seed, Rejected: len(e.m.res.Rejected),
		Reasons: map[string]int{}, Wall: wall}
	var ttft, tpot, wait, excess, own []float64
	var nominal, stall float64
	stalled, decoded := 0, 0
	for _, pr := range e.done {
		r := pr.r
		if r.Arrival < e.rc.sc.Warmup.D() {
			continue
		}
		out.Requests++
		out.Remote += btoi(pr.remote)
		out.RouterRemote += btoi(pr.routerRemote)
		out.Reasons[pr.pdReason.String()]++
		rec := PDRecord{ID: r.ID, Decode: e.insts[pr.decode].ID, Prefill: e.insts[pr.prefill].ID, Remote: pr.remote,
			Transfer: pr.transfer, TTFTMs: pdMs(pr.decodeStart - r.Arrival), StallMs: pdMs(pr.stall),
			SlotWaitMs: pdMs(pr.decodeStart - r.FirstToken - e.sc.PD.transfer(pr.transfer))}
		rec.OwnMs = float64(r.ownMs)
		ttft = append(ttft, rec.TTFTMs)
		excess = append(excess, rec.TTFTMs-rec.OwnMs)
		own = append(own, rec.OwnMs)
		wait = append(wait, rec.SlotWaitMs)
		if r.OutputTokens == 0 {
			out.Records = append(out.Records, rec)
			continue
		}
		decoded++
		n := float64(r.OutputTokens)
		rec.TPOTMs = pdMs(pr.decodeEnd-pr.decodeStart) / n
		out.Records = append(out.Records, rec)
		tpot = append(tpot, rec.TPOTMs)
		nominal += pdMs(e.insts[pr.decode].spec.DecodePerToken.D())
		stall += pdMs(pr.stall) / n
		stalled += btoi(pr.stall > 0)
	}
	slices.Sort(ttft)
	slices.Sort(tpot)
	slices.Sort(wait)
	slices.Sort(excess)
	slices.Sort(own)
	out.ExcessP99Ms, out.OwnP99Ms = percentile(excess, 0.99), percentile(own, 0.99)
	out.TTFTP50Ms, out.TTFTP99Ms, out.TTFTMeanMs = percentile(ttft, 0.5), percentile(ttft, 0.99), pdMean(ttft)
	out.TPOTP50Ms, out.TPOTMeanMs, out.TPOTP99Ms = percentile(tpot, 0.5), pdMean(tpot), percentile(tpot, 0.99)
	out.SlotWaitP99Ms = percentile(wait, 0.99)
	if decoded > 0 {
		out.NominalTPOTMs = nominal / float64(decoded)
		out.StallMsPerToken = stall / float64(decoded)
		out.StalledShare = float64(stalled) / float64(decoded)
	}
	var pb, lb time.Duration
	np, nl := 0, 0
	for k, in := range e.insts {
		b := in.busyAt(e.end)
		if e.busyEnd != nil {
			b = e.busyEnd[k]
		}
		if e.roles[k] == scheduler.RolePrefill {
			pb += b
			np++
		} else {
			lb += b
			nl++
		}
	}
	if np > 0 {
		out.PrefillBusy = float64(pb) / float64(e.end) / float64(np)
	}
	if nl > 0 {
		out.LocalBusy = float64(lb) / float64(e.end) / float64(nl)
	}
	return out
}

func pdMs(d time.Duration) float64 { return float64(d) / 1e6 }

func pdMean(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := 0.0
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}
