package server

import (
	"context"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/prefixroute/prefixroute/internal/rollout"
)

// RampStateLabels are the ramp states as prefixroute_ramp_state labels them: the rollout states,
// with a pause made by auto-hold or the drain guard (not by an operator)
// told apart as auto_held, the one to alert on.
var RampStateLabels = []string{"running", "paused", "auto_held", "done", "aborted"}

// rampStateLabel is r's state label (RampStateLabels).
func rampStateLabel(r *rollout.Ramp) string {
	if r.State == rollout.Paused && (strings.HasPrefix(r.Reason, "auto-hold") || strings.HasPrefix(r.Reason, "drain guard")) {
		return "auto_held"
	}
	return r.State.String()
}

// registerRampGauges exports, for every pool that had a ramp, its last
// ramp's state (prefixroute_ramp_state{pool,state}: 1 for the state it is
// in, 0 for the others) and progress (prefixroute_ramp_steps_applied,
// prefixroute_ramp_steps), read from the store at each scrape.
func (s *Server) registerRampGauges(m metric.Meter) error {
	state, err := m.Int64ObservableGauge("prefixroute_ramp_state",
		metric.WithDescription("1 for the state the pool's last ramp is in, 0 for the others: running, paused (by an operator), auto_held (paused by auto-hold or the drain guard: resume it), done, aborted."))
	if err != nil {
		return err
	}
	applied, err := m.Int64ObservableGauge("prefixroute_ramp_steps_applied", metric.WithUnit("{step}"),
		metric.WithDescription("Steps the pool's last ramp has applied; with prefixroute_ramp_steps, its progress."))
	if err != nil {
		return err
	}
	steps, err := m.Int64ObservableGauge("prefixroute_ramp_steps", metric.WithUnit("{step}"),
		metric.WithDescription("Steps of the pool's last ramp."))
	if err != nil {
		return err
	}
	_, err = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		for name, pc := range s.store.Pools() {
			r := pc.Ramp
			if r == nil {
				continue
			}
			pool := attribute.String("pool", name)
			cur := rampStateLabel(r)
			for _, st := range RampStateLabels {
				v := int64(0)
				if st == cur {
					v = 1
				}
				o.ObserveInt64(state, v, metric.WithAttributes(pool, attribute.String("state", st)))
			}
			o.ObserveInt64(applied, int64(r.Applied), metric.WithAttributes(pool))
			o.ObserveInt64(steps, int64(len(r.Steps)), metric.WithAttributes(pool))
		}
		return nil
	}, state, applied, steps)
	return err
}
