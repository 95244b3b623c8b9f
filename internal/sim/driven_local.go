package sim

import (
	"sync"
	"time"

	"github.com/prefixroute/prefixroute/internal/state"
)

// LocalRouter is a simulator baseline (Variant.Picker: llmd, random,
// round_robin, affinity) picking for a driving loop in its own process:
// the live counterpart of the baselines prefixsim runs, so that a live run
// can compare prefixrouted with one on the same wall-clock traffic. It sees
// what the baseline sees in a simulation (the reports the loop hands it,
// at the report interval the loop keeps) and nothing between them. Its
// picks skip the gRPC round trip a real picker costs, an advantage to the
// baseline. Safe for concurrent use: one mutex around the baseline.
type LocalRouter struct {
	mu sync.Mutex
	r  router
}

// Local returns the variant's baseline when the variant is one, nil for a
// router variant (which prefixrouted serves).
func (d *Driven) Local() *LocalRouter { return d.local }

// newLocalRouter builds the baseline of a driven baseline variant.
func newLocalRouter(rc *runConfig, insts []*Instance, seed uint64) *LocalRouter {
	rseed := seed ^ 0x9e3779b97f4a7c15 // the first router's seed in Run
	if rc.variant.Picker == "llmd" {
		return &LocalRouter{r: newLLMD(rc, insts, rseed)}
	}
	return &LocalRouter{r: newBaseline(rc, insts, rseed)}
}

// Pick returns the index of the instance the baseline chooses for r at
// virtual time now, or the baseline's error (scheduler.ErrAllWeightsZero
// when every weight is 0).
func (l *LocalRouter) Pick(now time.Duration, r *Request) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.r.pick(now, r)
}

// Report applies instance k's report (Driven.Report) at virtual time now.
func (l *LocalRouter) Report(now time.Duration, k int, rep *state.Report) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.r.report(now, k, rep)
}

// SetWeights publishes a weight step (Driven.OnWeights).
func (l *LocalRouter) SetWeights(w map[string]float64, version uint64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.r.setWeights(w, version)
	return nil
}
