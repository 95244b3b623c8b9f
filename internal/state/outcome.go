package state

import "time"

// UnreachableBackoff is how long a gateway's failed connect to an instance
// keeps it out of picks (excluded reason unreachable) at least: the
// exclusion ends when a gateway reports the instance served, or with the
// instance's first load report UnreachableBackoff or more after the failed
// connect. A dead server whose reporter still says ok is thus tried again
// about every 5 s, one failed connect each time.
const UnreachableBackoff = 5 * time.Second

// OutcomeKind is what a gateway's outcome of one try means to the state:
// the statuses that change nothing are OutcomeOther.
type OutcomeKind uint8

// The outcome kinds.
const (
	OutcomeOther         OutcomeKind = iota // counted by the caller; changes nothing here
	OutcomeServed                           // the instance answered: ends an unreachable exclusion
	OutcomeConnectFailed                    // the gateway could not connect: excludes the instance
)

// Outcome is one try of a picked request on an instance of the pool. It is
// a plain value.
type Outcome struct {
	Instance string
	Kind     OutcomeKind
}

// OutcomeResult is what ApplyOutcomes did.
type OutcomeResult struct {
	// Unknown counts the outcomes whose instance the pool does not know.
	Unknown int
	// Excluded counts the instances that a failed connect made unreachable
	// (not those that already were).
	Excluded int
	// Restored counts the unreachable instances a served outcome brought
	// back.
	Restored int
}

// ApplyOutcomes applies the outcomes of tries on the pool's instances at
// now: OutcomeConnectFailed makes the instance unreachable (its standing
// reason becomes scheduler.ReasonUnreachable) from now, OutcomeServed ends
// that. It looks under the read lock and takes the write lock only when
// something changes, so a batch of served outcomes of reachable instances
// (the common case) does not hold picks up. It allocates nothing. Safe
// for concurrent use.
func (p *Pool) ApplyOutcomes(now time.Time, outs []Outcome) OutcomeResult {
	var res OutcomeResult
	change := false
	p.mu.RLock()
	for i := range outs {
		in := p.byID[outs[i].Instance]
		if in == nil {
			res.Unknown++
			continue
		}
		switch outs[i].Kind {
		case OutcomeConnectFailed:
			change = true
		case OutcomeServed:
			change = change || in.unreachable
		}
	}
	p.mu.RUnlock()
	if !change {
		return res
	}
	res.Unknown = 0
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := range outs {
		in := p.byID[outs[i].Instance]
		if in == nil {
			res.Unknown++
			continue
		}
		switch outs[i].Kind {
		case OutcomeConnectFailed:
			if !in.unreachable {
				res.Excluded++
			}
			in.unreachable, in.unreachableAt = true, now
			p.setUnreachable(in)
		case OutcomeServed:
			if in.unreachable {
				in.unreachable = false
				res.Restored++
				p.setUnreachable(in)
			}
		}
	}
	return res
}

// setUnreachable copies in.unreachable into the snapshot template and its
// standing. Called with p.mu held.
func (p *Pool) setUnreachable(in *instance) {
	p.tmpl[in.ord].Unreachable = in.unreachable
	p.syncStanding(in.ord)
}

// Unreachable reports whether the pool knows the instance and a failed
// connect keeps it out of picks now. Safe for concurrent use.
func (p *Pool) Unreachable(instance string) (unreachable, known bool) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	in := p.byID[instance]
	if in == nil {
		return false, false
	}
	return in.unreachable, true
}
