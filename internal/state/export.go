package state

import "time"

// InstanceExport is one live instance as a snapshot for another replica
// carries it: its identity, its last report with its whole cache (oldest
// block first) as Stored, the work assigned since, and the report's age.
type InstanceExport struct {
	Identity Identity
	Last     Report
	Assigned uint64
	// AssignedKV is the KV blocks of the picks assigned since.
	AssignedKV uint64
	ReportAge  time.Duration
}

// Export returns every connected, reported instance of the pool at now,
// in snapshot order. The cache is the router's index of the instance:
// exact for instances with cache events, the approximate record for the
// others. Safe for concurrent use; it holds the read lock while copying.
func (p *Pool) Export(now time.Time) []InstanceExport {
	p.mu.RLock()
	defer p.mu.RUnlock()
	out := make([]InstanceExport, 0, len(p.order))
	for _, in := range p.order {
		if !in.connected || !in.reported {
			continue
		}
		e := InstanceExport{Identity: in.id, Last: in.last, Assigned: in.assigned, AssignedKV: in.assignedKV, ReportAge: max(0, now.Sub(in.lastReport))}
		e.Last.Stored = in.cache.oldest(make([]uint64, 0, in.cache.Len()), in.cache.Len())
		e.Last.Removed, e.Last.CacheCleared = nil, true
		out = append(out, e)
	}
	return out
}

// Import applies an exported instance through session s (from Connect for
// e.Identity): its report, dated ReportAge before now, replaces what the
// instance had, its cache included; then its assigned work is added. It
// returns ErrSessionEnded when s was replaced.
func (s *Session) Import(now time.Time, e *InstanceExport) error {
	if err := s.Report(now.Add(-e.ReportAge), &e.Last); err != nil {
		return err
	}
	s.pool.Assign(e.Identity.Instance, e.Assigned, e.AssignedKV, nil)
	return nil
}
