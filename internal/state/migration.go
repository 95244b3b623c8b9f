package state

import (
	"time"

	"github.com/prefixroute/prefixroute/internal/readiness"
	"github.com/prefixroute/prefixroute/scheduler"
)

// Migration answers GetMigrationStatus for the pool at now: the window of
// its picks (recorded by Pick) combined with its live state, the weights in
// force, the eligible instances' throughput and what their caches hold.
// Errors wrap the readiness sentinels (ErrUnknownDeployment,
// ErrSameDeployment, ErrInvalidQuery).
func (p *Pool) Migration(now time.Time, q readiness.Query) (readiness.Status, error) {
	return p.tracker.Status(now, q, &liveView{p: p, now: now})
}

// liveView is the pool as readiness.Status sees it. Each call takes the
// pool's read lock on its own.
type liveView struct {
	p   *Pool
	now time.Time
}

// eligible reports whether in can serve now as far as availability goes:
// the state ListInstances shows as ok. Called with p.mu held.
func (v *liveView) eligible(in *instance, stale time.Duration) bool {
	st, _ := in.state(v.now, stale)
	return st == StateOK
}

// Deployments implements readiness.Live.
func (v *liveView) Deployments(dst []readiness.LiveDeployment) []readiness.LiveDeployment {
	p := v.p
	cfg := p.cfg.Load()
	p.mu.RLock()
	defer p.mu.RUnlock()
	start := len(dst)
	for _, d := range p.deps {
		dst = append(dst, readiness.LiveDeployment{Name: d.name, Weight: d.weight})
	}
	for _, in := range p.order {
		if in.last.Role == scheduler.RolePrefill {
			dst[start+in.dep].PrefillRole++
		}
		if !v.eligible(in, cfg.Policy.StaleAfter) {
			continue
		}
		ld := &dst[start+in.dep]
		ld.Instances++
		if in.last.Role == scheduler.RolePrefill {
			ld.PrefillEligible++
		}
		tps := in.last.PrefillTokensPerSecond
		if tps <= 0 {
			tps = cfg.Policy.DefaultPrefillTokensPerSecond
		}
		ld.PrefillTokensPerSecond += tps
	}
	return dst
}

// Depth implements readiness.Live: the longest prefix of hashes cached on
// one eligible instance of deployment.
func (v *liveView) Depth(hashes []uint64, deployment string) int {
	p := v.p
	stale := p.cfg.Load().Policy.StaleAfter
	p.mu.RLock()
	defer p.mu.RUnlock()
	words := p.index.words
	matched := make([]int32, words*64)
	active, next := make([]uint64, words), make([]uint64, words)
	live := make([]uint64, words)
	any := false
	for _, in := range p.order {
		if p.deps[in.dep].name == deployment && v.eligible(in, stale) {
			live[in.slot/64] |= 1 << (in.slot % 64)
			any = true
		}
	}
	if !any {
		return 0
	}
	p.index.match(hashes, live, matched, active, next)
	best := 0
	for _, in := range p.order {
		if live[in.slot/64]&(1<<(in.slot%64)) != 0 {
			best = max(best, int(matched[in.slot]))
		}
	}
	return best
}
