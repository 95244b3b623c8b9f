package state

import (
	"cmp"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/prefixroute/prefixroute/internal/readiness"
	"github.com/prefixroute/prefixroute/scheduler"
)

// Registry holds every pool the router knows. Safe for concurrent use: the
// pool map has its own lock, held only to look a pool up or add one; each
// Pool then has its own.
type Registry struct {
	limits    Limits
	migration readiness.Config
	budget    *pairBudget

	mu    sync.RWMutex
	pools map[string]*Pool
}

// NewRegistry returns an empty registry with the given limits (zero fields
// take their defaults) and options.
func NewRegistry(limits Limits, opts ...Option) *Registry {
	l := limits.withDefaults()
	r := &Registry{limits: l, budget: &pairBudget{max: int64(l.MaxIndexPairs)}, pools: make(map[string]*Pool)}
	for _, o := range opts {
		o(r)
	}
	return r
}

// Option configures a Registry at NewRegistry.
type Option func(*Registry)

// WithMigration configures each pool's migration-readiness tracker (the
// window of picks GetMigrationStatus reads). Without it, or with the zero
// value, the trackers take the defaults of readiness.Config (a 5 min window
// in 60 buckets, 256 hot prefixes, 8 deployments). The caller validates c
// (readiness.Config.Validate).
func WithMigration(c readiness.Config) Option { return func(r *Registry) { r.migration = c } }

// Limits returns the registry's limits with defaults filled in.
func (r *Registry) Limits() Limits { return r.limits }

// Pool returns the named pool, or ErrPoolNotFound.
func (r *Registry) Pool(name string) (*Pool, error) {
	r.mu.RLock()
	p := r.pools[name]
	r.mu.RUnlock()
	if p == nil {
		return nil, fmt.Errorf("%w: %q", ErrPoolNotFound, name)
	}
	return p, nil
}

// Ensure returns the named pool, creating it with the default policy and no
// weights when it does not exist yet.
func (r *Registry) Ensure(name string) (*Pool, error) {
	r.mu.RLock()
	p := r.pools[name]
	if p != nil {
		p.ensures.Add(1) // under the lock: DropIdle sees it (registry_drop.go)
	}
	r.mu.RUnlock()
	if p != nil {
		return p, nil
	}
	if err := checkName("pool", name, r.limits.MaxNameBytes); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidName, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if p := r.pools[name]; p != nil {
		p.ensures.Add(1)
		return p, nil
	}
	if len(r.pools) >= r.limits.MaxPools {
		return nil, fmt.Errorf("%w: %d pools, the limit is %d", ErrTooManyPools, len(r.pools), r.limits.MaxPools)
	}
	p = newPool(name, r.limits, r.migration, r.budget)
	r.pools[name] = p
	return p, nil
}

// Pools returns every pool, sorted by name.
func (r *Registry) Pools() []*Pool {
	r.mu.RLock()
	out := make([]*Pool, 0, len(r.pools))
	for _, p := range r.pools {
		out = append(out, p)
	}
	r.mu.RUnlock()
	slices.SortFunc(out, func(a, b *Pool) int { return cmp.Compare(a.name, b.name) })
	return out
}

// Sweep forgets, in every pool, the instances disconnected for longer than
// their pool's forget_after, and returns how many it forgot.
func (r *Registry) Sweep(now time.Time) int {
	n := 0
	for _, p := range r.Pools() {
		n += p.Sweep(now)
	}
	return n
}

// Config is a pool's operator configuration. Published whole and never
// mutated after SetConfig, so readers may share it.
type Config struct {
	// Weights by deployment; nil means never set: every deployment weighs 1.
	Weights        map[string]float64
	WeightsVersion uint64
	Policy         scheduler.Policy
	PolicyVersion  uint64
}

// DefaultConfig is the configuration of a pool nobody configured.
func DefaultConfig() *Config { return &Config{Policy: scheduler.DefaultPolicy()} }

// CanHold reports whether the registry holds the named pool or has room to
// create it: ErrTooManyPools, or a name error wrapping ErrInvalidName.
func (r *Registry) CanHold(name string) error {
	if err := checkName("pool", name, r.limits.MaxNameBytes); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidName, err)
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	if _, ok := r.pools[name]; !ok && len(r.pools) >= r.limits.MaxPools {
		return fmt.Errorf("%w: %d pools, the limit is %d", ErrTooManyPools, len(r.pools), r.limits.MaxPools)
	}
	return nil
}
