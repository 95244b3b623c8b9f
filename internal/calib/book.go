package calib

import (
	"slices"
	"strings"
	"sync"

	"github.com/prefixroute/prefixroute/scheduler"
)

// MaxFitters bounds the fits a Book keeps: 1024 (pool, deployment) pairs,
// about 200 bytes each. Samples of a new pair beyond it are counted in
// Book.Dropped, not fitted.
const MaxFitters = 1024

// key names one deployment of one pool.
type key struct{ pool, deployment string }

// entry is one deployment's fitter under its own lock.
type entry struct {
	mu    sync.Mutex
	prior float64 // the policy's doubling context the fitter started from
	f     *Fitter
}

// Book holds one Fitter per (pool, deployment). Safe for concurrent use:
// a read lock to find the fitter, its own lock to feed it; Add does not
// allocate once the pair has a fitter.
type Book struct {
	mu      sync.RWMutex
	fits    map[key]*entry
	dropped uint64
}

// NewBook returns an empty book.
func NewBook() *Book { return &Book{fits: make(map[key]*entry)} }

// Add feeds s to the fit of deployment in pool, whose policy's doubling
// context is prior (a changed prior restarts the fit from it). It returns
// the fit's calibration and publish true when this sample made a new
// version of it (the caller passes it to the pool); accepted is false
// for a sample the fit ignored.
func (b *Book) Add(pool, deployment string, prior float64, s *Sample) (cal scheduler.Calibration, publish, accepted bool) {
	k := key{pool, deployment}
	b.mu.RLock()
	e := b.fits[k]
	b.mu.RUnlock()
	if e == nil {
		if e = b.create(k, prior); e == nil {
			return scheduler.Calibration{}, false, false
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.prior != prior {
		e.prior, e.f = prior, NewFitter(prior)
		publish = true // back to the prior (Version 0) until the new fit has samples
	}
	v := e.f.version
	accepted = e.f.Add(s)
	return e.f.Calibration(), publish || e.f.version != v, accepted
}

// create adds the fitter of k, nil when the book is full.
func (b *Book) create(k key, prior float64) *entry {
	b.mu.Lock()
	defer b.mu.Unlock()
	if e := b.fits[k]; e != nil {
		return e
	}
	if len(b.fits) >= MaxFitters {
		b.dropped++
		return nil
	}
	e := &entry{prior: prior, f: NewFitter(prior)}
	b.fits[k] = e
	return e
}

// DeploymentStatus is one deployment's fit.
type DeploymentStatus struct {
	Deployment string
	Status
}

// Pool returns the fits of pool's deployments, by name.
func (b *Book) Pool(pool string) []DeploymentStatus {
	b.mu.RLock()
	var out []DeploymentStatus
	for k, e := range b.fits {
		if k.pool == pool {
			e.mu.Lock()
			out = append(out, DeploymentStatus{Deployment: k.deployment, Status: e.f.Status()})
			e.mu.Unlock()
		}
	}
	b.mu.RUnlock()
	slices.SortFunc(out, func(a, b DeploymentStatus) int { return strings.Compare(a.Deployment, b.Deployment) })
	return out
}

// DropPool forgets pool's fits (the registry dropped the pool).
func (b *Book) DropPool(pool string) {
	b.mu.Lock()
	for k := range b.fits {
		if k.pool == pool {
			delete(b.fits, k)
		}
	}
	b.mu.Unlock()
}

// Dropped counts samples of pairs beyond MaxFitters.
func (b *Book) Dropped() uint64 {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.dropped
}
