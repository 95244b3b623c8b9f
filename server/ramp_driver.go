package server

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/prefixroute/prefixroute/internal/rollout"
	"github.com/prefixroute/prefixroute/internal/store"
)

// RunRamps applies the due steps of running ramps every RampTick until ctx
// ends.
func (s *Server) RunRamps(ctx context.Context) {
	every(ctx, s.opts.RampTick, func() { s.AdvanceRamps() })
}

// AdvanceRamps applies, for every pool whose running ramp has a step due
// now, that one step (a ramp late by several steps catches up one step per
// call, so a restart never jumps straight to a later step), and returns how
// many it applied. A ramp is paused instead when the step would drain the
// pool's live traffic (drainHold; not for a ramp started with allow_drain),
// or, with auto-hold, would leave its target deployment less headroom than
// asked. A step that
// cannot be persisted is logged and retried on the next call.
func (s *Server) AdvanceRamps() int {
	due := s.store.DueRamps(s.opts.Now())
	applied := 0
	for _, name := range slices.Sorted(maps.Keys(due)) {
		r := due[name]
		if s.stepRamp(name, &r) {
			applied++
		}
	}
	return applied
}

// stepRamp applies the next step of pool's ramp r, or pauses r when
// auto-hold (or the drain guard) says so, through the one write path
// (write). It reports whether a step was applied. Every failure is
// logged: a change not made is retried on the next tick, one stored but
// not put in force here is not (the stored ramp has moved on).
func (s *Server) stepRamp(pool string, r *rollout.Ramp) bool {
	by := fmt.Sprintf("ramp %d step %d/%d (started by %s)", r.ID, r.Applied+1, len(r.Steps), r.StartedBy)
	var reason, paused string
	pc, stored, err := s.write(pool, by, func() (store.Edit, string, error) {
		reason, paused = s.drainHold(pool, r), "ramp paused by the drain guard; resume it once the target has an eligible instance"
		if reason == "" {
			reason, paused = s.holdReason(pool, r), "ramp paused by auto-hold; resume it once the target has headroom"
		}
		if reason != "" {
			e, err := store.UpdateRampEdit(pool, r.ID, store.RampPause, reason)
			return e, "", err
		}
		return store.StepRampEdit(pool, r.ID, r.Applied), "", nil
	})
	if err != nil && !stored {
		switch {
		case reason != "":
			s.log.Error("ramp auto-hold: cannot pause; retrying on the next tick", "pool", pool, "ramp", r.ID,
				"reason", reason, "error", err)
		case errors.Is(err, store.ErrRampNotActive) || errors.Is(err, store.ErrNoRamp):
			// changed since it was read: paused, aborted, or stepped already
		default:
			s.log.Error("ramp step not applied; retrying on the next tick", "pool", pool, "ramp", r.ID,
				"step", r.Applied+1, "error", err)
		}
		return false
	}
	if reason != "" {
		if err != nil {
			s.log.Error("ramp pause stored but not in force", "pool", pool, "ramp", r.ID, "error", err)
		}
		s.log.Warn(paused, "pool", pool, "ramp", r.ID, "reason", reason)
		return false
	}
	if err != nil {
		s.log.Error("ramp step stored but not in force", "pool", pool, "ramp", r.ID, "error", err)
	}
	s.log.Info("ramp step applied", "pool", pool, "ramp", r.ID, "step", pc.Ramp.Applied, "steps", len(pc.Ramp.Steps),
		"weights", pc.Weights, "weights_version", pc.WeightsVersion, "state", pc.Ramp.State.String())
	return true
}
