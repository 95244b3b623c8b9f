package state

import (
	"cmp"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prefixroute/prefixroute/internal/readiness"
	"github.com/prefixroute/prefixroute/scheduler"
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
	work   workMeter                   // prefill tokens picked, for backlogWeight
	bsums  atomic.Pointer[backlogSums] // backlogWeight's reading of the instances, for backlogRefresh
	cfg    atomic.Pointer[Config]
	// calib holds the fitted prefill model of each deployment by name
	// (SetCalibration), under mu; the deployments carry a copy.
	calib map[string]scheduler.Calibration
	// ensures counts the Ensure calls that returned the pool, for DropIdle.
	ensures atomic.Uint64
	// retries counts picks decided again (pick_retry.go).
	retries atomic.Uint64

	mu       sync.RWMutex
	assigns  uint64               // picks accounted so far, under mu (pick_retry.go)
	slots    []*instance          // by slot; nil = free
	byID     map[string]*instance // by instance id
	order    []*instance          // by (deployment, instance id): the snapshot order
	deps     []deployment         // sorted by name: configured or with instances
	index    prefixIndex
	sessions uint64 // last session number handed out
	budget   *pairBudget
	counted  int                // index pairs already added to budget
	tracker  *readiness.Tracker // the window of picks for Migration; its own lock
	idle     poolIdle           // DropIdle's record (registry_drop.go)

	// The snapshot template, kept up to date under the write lock so that a
	// pick copies it whole: by order index, each instance's scheduler view
	// without the per-pick fields (MatchedBlocks, ReportAge, Excluded and
	// overrides), its address, its slot, and its last report's time as
	// nanoseconds since ageEpoch (noAge: compute the age from lastReport).
	tmpl  []scheduler.Instance
	addrs []string
	tslot []uint32
	tlast []int64
	// By order index too, for a pick that summarises the deployments
	// without copying the template (pickChosen): each instance's
	// scheduler.Standing reason (standOdd: it needs scheduler.Decide) and
	// load; and where each deployment's instances start in the order
	// (dstart[k]..dstart[k+1], len(deps)+1 entries).
	tstand []scheduler.Reason
	tload  []float64
	dstart []int
	// Kept with tstand for a pick that need not look at each instance
	// (pickChosen when no instance can be stale): per deployment k the
	// count of its instances by standing reason, dcount[k*standKinds+r];
	// by slot, the bitset of instances whose standing reason is ReasonNone
	// and each slot's deployment; and a lower bound on the report time of
	// the connected instances (noAge: unknown, recompute), so that a pick
	// knows none is stale without looking.
	dcount   []int32
	elig     []uint64
	sdep     []int32
	minLast  atomic.Int64
	live     []uint64 // bitset of slots in use, index.words words
	ageEpoch time.Time
	ageMono  bool // ageEpoch carries a monotonic clock reading
	hasEpoch bool
}

// noAge marks a template entry whose report age Pick computes with
// time.Time.Sub: never reported, or a report time not comparable with the
// epoch by plain subtraction.
const noAge = math.MinInt64

// maxRelAge bounds the epoch-relative times that are subtracted directly,
// so that their difference cannot overflow.
const maxRelAge = 1 << 62

// hasMono reports whether t carries a monotonic clock reading (Round(0)
// strips it, changing the value).
func hasMono(t time.Time) bool { return t.Round(0) != t }

// relTime returns t - ageEpoch in nanoseconds, or ok false when the
// difference is not exactly what t.Sub(u) gives for another time u also
// relative to the epoch: no epoch yet, a monotonic reading on one side only,
// or a difference too large.
func (p *Pool) relTime(t time.Time) (ns int64, ok bool) {
	if !p.hasEpoch || hasMono(t) != p.ageMono {
		return 0, false
	}
	if p.ageMono { // Sub subtracts the monotonic readings
		d := t.Sub(p.ageEpoch)
		if d >= maxRelAge || d <= -maxRelAge {
			return 0, false
		}
		return int64(d), true
	}
	// Wall clocks: what Sub computes, without its overflow check.
	ds := t.Unix() - p.ageEpoch.Unix()
	if ds >= maxRelSec || ds <= -maxRelSec {
		return 0, false
	}
	return ds*1e9 + int64(t.Nanosecond()-p.ageEpoch.Nanosecond()), true
}

// maxRelSec bounds the seconds of a wall-clock relTime so that its result
// stays within maxRelAge.
const maxRelSec = 4e9

// deployment is one deployment as the snapshot shows it.
type deployment struct {
	name       string
	weight     float64
	configured bool // named in the configured weights
	instances  int
	calib      scheduler.Calibration // fitted prefill model (SetCalibration)
}

func newPool(name string, limits Limits, migration readiness.Config, budget *pairBudget) *Pool {
	p := &Pool{name: name, limits: limits, byID: make(map[string]*instance), index: newPrefixIndex(), budget: budget,
		tracker: readiness.New(migration)}
	p.live = make([]uint64, p.index.words)
	p.dstart = []int{0}
	p.elig = make([]uint64, p.index.words)
	p.minLast.Store(noAge)
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
	defer p.settle()
	p.cfg.Store(c)
	p.tracker.SetDefaultBlockSize(c.Policy.BlockSizeTokens)
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
		d := deployment{name: name, weight: 1, instances: n, calib: p.calib[name]}
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
	p.resync()
}

// insertOrder adds in to p.order, which is sorted by (deployment, instance
// id), at its place: one binary search and one move instead of a sort, so
// that connecting a fleet of n instances costs O(n) per instance. Called
// with p.mu held.
func (p *Pool) insertOrder(in *instance) {
	at, _ := slices.BinarySearchFunc(p.order, in, compareOrder)
	p.order = slices.Insert(p.order, at, in)
}

// compareOrder is the snapshot order: by deployment, then instance id.
func compareOrder(a, b *instance) int {
	if c := cmp.Compare(a.id.Deployment, b.id.Deployment); c != 0 {
		return c
	}
	return cmp.Compare(a.id.Instance, b.id.Instance)
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
	defer p.settle()
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
	return p.index.count, p.index.pairs
}
