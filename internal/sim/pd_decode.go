package sim

import (
	"math"
	"time"
)

// The batch-dependent decode (PDSpec.DecodeMsPerRunning > 0): with n
// requests decoding on an instance, each advances one token a step of
//
//	step(n) = decode_per_token + decode_ms_per_running·(n−1)
//
// except while a stall freezes it. Each running request keeps its steps
// left as of its instance's slots.at; every change of n (a decode starts or
// ends) or of a stall first advances them to now, then moves each end
// (reschedule) and pushes an event at the new end. decodeDonePD drops the
// events an end has since left.

// batched reports whether the decode step depends on the batch.
func (e *pdEngine) batched() bool { return e.sc.PD.DecodeMsPerRunning > 0 }

// step is instance k's decode step with n requests decoding, in ns.
func (e *pdEngine) step(k, n int) float64 {
	return float64(e.insts[k].spec.DecodePerToken.D()) + e.sc.PD.DecodeMsPerRunning*1e6*float64(max(n-1, 0))
}

// advance runs instance k's decodes from slots.at to now at the step of
// their current batch, less each one's frozen time.
func (e *pdEngine) advance(k int) {
	s := &e.slots[k]
	if dt := e.now - s.at; dt > 0 && len(s.running) > 0 {
		step := e.step(k, len(s.running))
		for _, pr := range s.running {
			frozen := min(max(pr.frozen-s.at, 0), dt)
			pr.left = max(pr.left-float64(dt-frozen)/step, 0)
		}
	}
	s.at = e.now
}

// reschedule sets each of instance k's decode ends from its steps left at
// the current batch's step, pushing an event for each end that moved.
func (e *pdEngine) reschedule(k int) {
	s := &e.slots[k]
	step := e.step(k, len(s.running))
	for _, pr := range s.running {
		end := max(e.now, pr.frozen) + time.Duration(math.Ceil(pr.left*step))
		if end != pr.decodeEnd {
			pr.decodeEnd = end
			e.q.push(event{at: end, kind: evDecodeDone, inst: int32(k), req: pr.r})
		}
	}
}

// admitBatched starts pr's decode on instance k (a slot is free).
func (e *pdEngine) admitBatched(k int, pr *pdReq) {
	e.advance(k)
	s := &e.slots[k]
	pr.left = float64(pr.r.OutputTokens)
	pr.frozen = 0
	pr.decodeEnd = -1
	s.running = append(s.running, pr)
	e.reschedule(k)
}

// stallBatched freezes every decode running on instance k for stall more.
func (e *pdEngine) stallBatched(k int, stall time.Duration) {
	if stall <= 0 || len(e.slots[k].running) == 0 {
		return
	}
	e.advance(k)
	for _, pr := range e.slots[k].running {
		pr.frozen = max(pr.frozen, e.now) + stall
		pr.stall += stall
	}
	e.reschedule(k)
}
