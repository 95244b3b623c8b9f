package state

import (
	"cmp"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Pool is the live state of one pool: its configuration, its instances with
// their latest load, and the prefix index. Safe for concurrent use. Reports
// and configuration changes take the write lock for a short, bounded section;
// Pick takes the read lock to copy a snapshot and match the prefix, runs the
// scheduler with no lock held, then takes the write lock briefly to account
// for the work it assigned.
type Pool struct {
	name   string
	limits Limits
	cfg    atomic.Pointer[Config]

	mu       sync.RWMutex
	slots    []*instance          // by slot; nil = free
	byID     map[string]*instance // by instance id
	order    []*instance          // by (deployment, instance id): the snapshot order
	deps     []deployment         // sorted by name: configured or with instances
	index    prefixIndex
	sessions uint64 // last session number handed out
}

// deployment is one deployment as the snapshot shows it.
type deployment struct {
	name       string
	weight     float64
	configured bool // named in the configured weights
	instances  int
}

func newPool(name string, limits Limits) *Pool {
	p := &Pool{name: name, limits: limits, byID: make(map[string]*instance), index: newPrefixIndex()}
	p.cfg.Store(DefaultConfig())
	return p
}

// Name is the pool's name.
func (p *Pool) Name() string { return p.name }

// Config returns the configuration in force. The caller must not modify it.
func (p *Pool) Config() *Config { return p.cfg.Load() }

// SetConfig publishes a new configuration. The caller must not modify c
// afterwards. Capacity defaults of the prefix index follow the new policy.
func (p *Pool) SetConfig(c *Config) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cfg.Store(c)
	p.rebuildDeployments()
	for _, in := range p.slots {
		if in != nil {
			p.applyCapacity(in)
		}
	}
}

// rebuildDeployments recomputes p.deps and each instance's deployment index
// from the configured weights and the instances. Called with p.mu held.
func (p *Pool) rebuildDeployments() {
	cfg := p.cfg.Load()
	count := make(map[string]int, len(p.deps))
	for _, in := range p.order {
		count[in.id.Deployment]++
	}
	for name := range cfg.Weights {
		if _, ok := count[name]; !ok {
			count[name] = 0
		}
	}
	p.deps = p.deps[:0]
	for name, n := range count {
		d := deployment{name: name, weight: 1, instances: n}
		if cfg.Weights != nil {
			d.weight, d.configured = cfg.Weights[name]
		}
		p.deps = append(p.deps, d)
	}
	slices.SortFunc(p.deps, func(a, b deployment) int { return cmp.Compare(a.name, b.name) })
	for _, in := range p.order {
		in.dep, _ = slices.BinarySearchFunc(p.deps, in.id.Deployment,
			func(d deployment, name string) int { return cmp.Compare(d.name, name) })
	}
}

// sortOrder keeps p.order sorted by (deployment, instance id). Called with
// p.mu held.
func (p *Pool) sortOrder() {
	slices.SortFunc(p.order, func(a, b *instance) int {
		if c := cmp.Compare(a.id.Deployment, b.id.Deployment); c != 0 {
			return c
		}
		return cmp.Compare(a.id.Instance, b.id.Instance)
	})
}

// DeploymentWeight is one deployment's weight in force.
type DeploymentWeight struct {
	Deployment string
	Weight     float64
	// Share is Weight over the sum of weights (0 when the sum is 0).
	Share float64
	// Configured is false for the equal split and for deployments left out of
	// the configured weights.
	Configured bool
	Instances  int
}

// Deployments returns every known deployment with its weight in force.
func (p *Pool) Deployments() []DeploymentWeight {
	p.mu.RLock()
	defer p.mu.RUnlock()
	out := make([]DeploymentWeight, len(p.deps))
	sum := 0.0
	for _, d := range p.deps {
		sum += d.weight
	}
	for i, d := range p.deps {
		out[i] = DeploymentWeight{Deployment: d.name, Weight: d.weight, Configured: d.configured, Instances: d.instances}
		if sum > 0 {
			out[i].Share = d.weight / sum
		}
	}
	return out
}

// Sweep forgets, with their prefix-index entries, the instances disconnected
// for longer than forget_after and those whose stream is open but silent for
// longer than forget_after (their session's Done is closed, so the stream
// ends and a live instance reconnects). It returns how many it forgot.
func (p *Pool) Sweep(now time.Time) int {
	forget := p.cfg.Load().Policy.ForgetAfter
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, in := range p.slots {
		if in == nil || (in.connected && !in.reported) {
			continue // between Connect and its first Report
		}
		since := in.lastReport
		if !in.connected {
			since = in.disconnectedAt
		}
		if now.Sub(since) > forget {
			p.forget(in)
			n++
		}
	}
	if n > 0 {
		p.rebuildDeployments()
	}
	return n
}

// Counts returns the number of deployments and instances.
func (p *Pool) Counts() (deployments, instances int) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return len(p.deps), len(p.order)
}

// IndexStats returns the prefix index's distinct blocks and (block, instance)
// pairs.
func (p *Pool) IndexStats() (blocks, pairs int) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return len(p.index.entries), p.index.pairs
}
