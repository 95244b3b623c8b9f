package state

import (
	"fmt"
	"slices"
	"time"

	"github.com/prefixroute/prefixroute/scheduler"
)

// Identity names a reporting instance. It is fixed for a stream's life.
type Identity struct {
	Pool, Deployment, Instance, Address string
}

// Report is one load report of an instance.
type Report struct {
	Seq                    uint64
	RunningRequests        uint32
	WaitingRequests        uint32
	QueuedPrefillTokens    uint64
	QueueMs                float64
	HasQueueMs             bool
	KVCacheUsage           float64
	KVCapacityBlocks       uint64
	PrefillTokensPerSecond float64
	BlockSizeTokens        uint32
	Draining               bool
	ReportsCacheEvents     bool
	// CacheCleared drops every block of the instance before Stored applies.
	CacheCleared bool
	// Role is the instance's prefill/decode role (scheduler.RoleBoth by
	// default).
	Role    scheduler.Role
	Stored  []uint64
	Removed []uint64
}

// instance is the router's record of one instance. Guarded by its Pool's lock.
type instance struct {
	slot           uint32
	ord            int // index into Pool.order and the snapshot template
	id             Identity
	laneKey        uint64 // scheduler.LaneKey(id.Instance)
	dep            int    // index into Pool.deps
	last           Report
	reported       bool // at least one report applied
	lastReport     time.Time
	connected      bool
	disconnectedAt time.Time
	session        *Session
	assigned       uint64    // prefill work (scheduler.WorkTokens) picked onto it since its last report
	assignedKV     uint64    // KV blocks of the uncached tokens picked onto it since (scheduler.KVBlocks)
	ledger         ledger    // its latest picks, for the queue estimate
	answered       time.Time // when the latest pick for it is answered (its dispatch hold's end; pace)
	assignedAt     uint64    // Pool.assigns after its latest pick was accounted (pick_retry.go)
	cache          *blockLRU
	// unreachable: a gateway reported a failed connect at unreachableAt
	// and the instance has not served since, nor reported after
	// UnreachableBackoff (outcome.go).
	unreachable   bool
	unreachableAt time.Time
}

// Session is one report stream's hold on an instance. Done is closed when a
// newer stream for the same instance replaced this one, or the instance was
// forgotten; the stream should then end.
type Session struct {
	pool *Pool
	in   *instance
	num  uint64
	done chan struct{}
	took Takeover // what Connect took over (takeover.go)
}

// TookOver reports whether Connect replaced a session of the instance that
// was still open, and the address that session had: a reconnect before
// the old stream's end was noticed, or two streams sharing an instance id.
// A move to another deployment is not one of these (see Takeover).
func (s *Session) TookOver() (prevAddress string, ok bool) {
	return s.took.PrevAddress, s.took.Live && s.took.MovedFrom == ""
}

// Done is closed when the session has been replaced.
func (s *Session) Done() <-chan struct{} { return s.done }

// Connect starts a report session for id, replacing any live session of the
// same instance (whose Done is closed). An instance that comes back in
// another deployment is forgotten and added anew. It is ConnectIf with no
// check: for callers that checked the identity elsewhere (other replicas'
// events, the simulator).
func (p *Pool) Connect(now time.Time, id Identity) (*Session, error) {
	return p.ConnectIf(now, id, nil)
}

// ConnectIf is Connect, except that when the new session would take over
// the instance (replace its open session, or move it from another
// deployment) covers decides first, given the instance's identity where it
// lives now: when it says no, nothing changes and the error is a
// *TakeoverError (ErrTakeoverRefused). A nil covers allows every takeover.
// Instance ids are unique per pool, not per deployment, so this is what
// keeps a caller bound to one deployment off another's instances.
func (p *Pool) ConnectIf(now time.Time, id Identity, covers Covers) (*Session, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	defer p.settle()
	in := p.byID[id.Instance]
	took, taking := isTakeover(in, id)
	if taking && covers != nil && !covers(in.id) {
		return nil, &TakeoverError{Pool: p.name, Instance: id.Instance, From: in.id.Deployment, To: id.Deployment, Live: took.Live}
	}
	forgot := false
	if took.MovedFrom != "" {
		p.forget(in)
		in, forgot = nil, true
	}
	if in == nil {
		if len(p.order) >= p.limits.MaxInstancesPerPool {
			if forgot {
				p.rebuildDeployments()
			}
			return nil, fmt.Errorf("%w %q: %d instances, the limit is %d",
				ErrTooManyInstances, p.name, len(p.order), p.limits.MaxInstancesPerPool)
		}
		// lastReport stays zero until the first report: a new instance is
		// stale, never picked on load figures it has not sent yet.
		in = &instance{slot: p.freeSlot(), id: id, laneKey: scheduler.LaneKey(id.Instance)}
		in.cache = newBlockLRU(0)
		p.slots[in.slot] = in
		p.byID[id.Instance] = in
		p.insertOrder(in)
		p.index.grow(in.slot)
		p.rebuildDeployments()
		p.applyCapacity(in)
	}
	if in.session != nil {
		close(in.session.done)
	}
	p.sessions++
	s := &Session{pool: p, in: in, num: p.sessions, done: make(chan struct{}), took: took}
	in.session = s
	in.id.Address = id.Address
	in.connected = true
	p.syncInstance(in)
	return s, nil
}

// Report applies one report of the session's instance: load figures replace
// the previous ones, the work assigned since the last report is dropped (the
// report accounts for it), and cache events update the prefix index. It
// returns ErrSessionEnded when the session was replaced.
func (s *Session) Report(now time.Time, rep *Report) error {
	p := s.pool
	p.mu.Lock()
	defer p.mu.Unlock()
	err := p.report(s, now, rep)
	p.settle()
	return err
}

// ReportAll applies reps[i] to ss[i], as Session.Report does, for sessions
// of p, in order, under one acquisition of the pool's lock: a node agent's
// message of several instances' reports costs one hand-off of the lock,
// not one each (under 100,000 reports/s from a thousand streams, the
// hand-offs of one lock each made a convoy that Picks queued behind).
// errs[i] is ErrSessionEnded when ss[i] was replaced; errs has len(ss).
func (p *Pool) ReportAll(now time.Time, ss []*Session, reps []*Report, errs []error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, s := range ss {
		if s.pool != p {
			panic("state: ReportAll with a session of another pool")
		}
		errs[i] = p.report(s, now, reps[i])
	}
	p.settle()
}

// Pool returns the pool of the session.
func (s *Session) Pool() *Pool { return s.pool }

// report applies rep to s's instance. Called with p.mu held; the caller
// settles the budget after.
func (p *Pool) report(s *Session, now time.Time, rep *Report) error {
	in := s.in
	if in.session != s {
		return ErrSessionEnded
	}
	// Before the first report in.last is zero: the instance counted as
	// approximate, and picks may have recorded guesses on it that a first
	// report with cache events must drop.
	modeChanged := in.last.ReportsCacheEvents != rep.ReportsCacheEvents
	capChanged := !in.reported || in.last.KVCapacityBlocks != rep.KVCapacityBlocks
	in.last = *rep
	in.last.Stored, in.last.Removed = nil, nil
	in.reported = true
	in.lastReport = now
	in.assigned, in.assignedKV = 0, 0
	if in.unreachable && now.Sub(in.unreachableAt) >= UnreachableBackoff {
		in.unreachable = false
	}
	p.syncReport(in)
	if capChanged {
		p.applyCapacity(in)
	}
	if rep.CacheCleared || modeChanged {
		p.clearCache(in)
	}
	for removed := rep.Removed; len(removed) > 0; {
		batch := removed[:min(len(removed), storeBatch)]
		removed = removed[len(batch):]
		for _, h := range batch {
			p.index.touch(h)
			in.cache.touch(h)
		}
		for _, h := range batch {
			if in.cache.Remove(h) {
				p.index.remove(h, in.slot)
			}
		}
	}
	p.storeAll(in, rep.Stored)
	return nil
}

// storeBatch is how many cache events Report looks ahead.
const storeBatch = 16

// storeAll stores hashes on in, in order. Before each batch it touches
// everything the batch will look up: the index and LRU slots of the new
// hashes and of the blocks that storing them would evict if all were new.
// The lookups then hit the cache, since the touches' misses overlap.
func (p *Pool) storeAll(in *instance, hashes []uint64) {
	var buf [storeBatch]uint64
	for len(hashes) > 0 {
		batch := hashes[:min(len(hashes), storeBatch)]
		hashes = hashes[len(batch):]
		for _, h := range batch {
			p.index.touch(h)
			in.cache.touch(h)
		}
		if c := in.cache; c.capacity > 0 && c.Len()+len(batch) > c.capacity {
			for _, h := range c.oldest(buf[:0], c.Len()+len(batch)-c.capacity) {
				p.index.touch(h)
				c.touch(h)
			}
		}
		for _, h := range batch {
			p.store(in, h)
		}
	}
}

// Close marks the session's instance disconnected, unless a newer session
// took it over. The instance is forgotten after forget_after.
func (s *Session) Close(now time.Time) {
	p := s.pool
	p.mu.Lock()
	defer p.mu.Unlock()
	if s.in.session != s {
		return
	}
	s.in.session = nil
	s.in.connected = false
	s.in.disconnectedAt = now
	p.syncInstance(s.in)
}

// store records h as held by in, evicting in's least recently used block when
// it is full. Called with p.mu held.
func (p *Pool) store(in *instance, h uint64) {
	inserted, ev, evicted := in.cache.Touch(h)
	if evicted {
		p.index.remove(ev, in.slot)
	}
	if inserted {
		p.index.add(h, in.slot)
	}
}

func (p *Pool) clearCache(in *instance) {
	in.cache.Each(func(h uint64) { p.index.remove(h, in.slot) })
	in.cache = newBlockLRU(in.cache.capacity)
}

// applyCapacity bounds in's cache by its reported kv_capacity_blocks, else the
// policy default, and never over Limits.MaxBlocksPerInstance.
func (p *Pool) applyCapacity(in *instance) {
	c := in.last.KVCapacityBlocks
	if c == 0 {
		c = p.cfg.Load().Policy.DefaultKVCapacityBlocks
	}
	if c == 0 || c > uint64(p.limits.MaxBlocksPerInstance) {
		c = uint64(p.limits.MaxBlocksPerInstance)
	}
	in.cache.SetCapacity(int(c), func(h uint64) { p.index.remove(h, in.slot) })
}

// forget drops in and its index entries, ending its session. Called with
// p.mu held; the caller rebuilds the deployments.
func (p *Pool) forget(in *instance) {
	p.clearCache(in)
	if in.session != nil {
		close(in.session.done)
		in.session = nil
	}
	p.slots[in.slot] = nil
	delete(p.byID, in.id.Instance)
	p.order = slices.DeleteFunc(p.order, func(x *instance) bool { return x == in })
}

// freeSlot returns the lowest free slot, growing the slot table when full.
func (p *Pool) freeSlot() uint32 {
	for i, in := range p.slots {
		if in == nil {
			return uint32(i)
		}
	}
	p.slots = append(p.slots, nil)
	return uint32(len(p.slots) - 1)
}
