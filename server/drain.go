package server

import (
	"fmt"

	"github.com/prefixroute/prefixroute/internal/rollout"
	"github.com/prefixroute/prefixroute/internal/state"
)

// The drain guard: a weights change (SetWeights, each step of a StartRamp)
// that would take all traffic away from the deployments serving now, or
// that gives weight to a deployment the pool has never seen, is refused
// with FailedPrecondition unless the request sets allow_drain; a ramp
// started without allow_drain is paused before a step that would drain
// (its instances may have gone since it started). The rules are
// rollout.CheckWeights'.

// guardDeployments returns the deployments the pool has seen with their
// weights in force and eligible (ok) instances now, or nil when the
// registry does not hold the pool.
func (s *Server) guardDeployments(pool string) []rollout.Deployment {
	p, err := s.reg.Pool(pool)
	if err != nil {
		return nil
	}
	deps := p.Deployments()
	out := make([]rollout.Deployment, len(deps))
	at := make(map[string]int, len(deps))
	for i, d := range deps {
		out[i] = rollout.Deployment{Name: d.Deployment, Weight: d.Weight}
		at[d.Deployment] = i
	}
	for _, in := range p.Instances(s.opts.Now()) {
		if i, ok := at[in.Deployment]; ok && in.State == state.StateOK {
			out[i].Eligible++
		}
	}
	return out
}

// guardWeights checks each of the weight maps a change would put in force
// against the pool as it is. It returns "" and nil when the guard lets the
// change through; a note for the audit log when it would refuse it but
// allowDrain overrides it; else a FailedPrecondition status naming the
// deployments and cli, the prefixctl command with --force that overrides
// it. Called with adminMu held.
func (s *Server) guardWeights(pool string, allowDrain bool, cli string, weights ...map[string]float64) (string, error) {
	deps := s.guardDeployments(pool)
	for i, w := range weights {
		p := rollout.Problems(deps, w)
		if p == "" {
			continue
		}
		if len(weights) > 1 {
			p = fmt.Sprintf("step %d of %d: %s", i+1, len(weights), p)
		}
		err := fmt.Errorf("%w: pool %q: %s", rollout.ErrDrain, pool, p)
		if allowDrain {
			return "allow_drain overrode: " + err.Error(), nil
		}
		return "", statusOf(fmt.Errorf("%w; check the weights, or set allow_drain (%s --force) to make the change anyway", err, cli))
	}
	return "", nil
}

// drainHold returns why a ramp started without allow_drain should pause
// before its next step: the step would drain the pool's live traffic. ""
// to go on. Called with adminMu held.
func (s *Server) drainHold(pool string, r *rollout.Ramp) string {
	next, ok := r.Next()
	if r.AllowDrain || !ok {
		return ""
	}
	if p := rollout.Drains(s.guardDeployments(pool), next.Weights); p != "" {
		return fmt.Sprintf("drain guard: step %d of %d: %s; resume once it has, or abort", r.Applied+1, len(r.Steps), p)
	}
	return ""
}

// withOverride is the audit log's caller of a change the drain guard let
// through only because of allow_drain.
func withOverride(caller, note string) string {
	if note == "" {
		return caller
	}
	return caller + "; " + note
}
