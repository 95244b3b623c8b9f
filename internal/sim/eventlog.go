package sim

// eventLog is an instance's cache events since its last report, coalesced:
// a block stored then evicted (or evicted then stored again) between two
// reports cancels out, so a report carries exactly the difference between
// the cache it describes and the one the previous report described, in the
// order the changes happened. Not safe for concurrent use.
type eventLog struct {
	ops []blockOp
	at  map[uint64]int32 // hash -> its live op in ops
}

type blockOp struct {
	hash   uint64
	stored bool
	live   bool
}

// add records that h was stored (or removed). Operations on one block
// alternate, so a pending operation on h is always the opposite one and
// the two cancel.
func (l *eventLog) add(h uint64, stored, on bool) {
	if !on {
		return
	}
	if l.at == nil {
		l.at = make(map[uint64]int32)
	}
	if i, ok := l.at[h]; ok {
		l.ops[i].live = false
		delete(l.at, h)
		return
	}
	l.at[h] = int32(len(l.ops))
	l.ops = append(l.ops, blockOp{hash: h, stored: stored, live: true})
}

// drain appends the pending stored and removed blocks to the given slices,
// in event order, and empties the log.
func (l *eventLog) drain(stored, removed []uint64) ([]uint64, []uint64) {
	for _, op := range l.ops {
		switch {
		case !op.live:
		case op.stored:
			stored = append(stored, op.hash)
		default:
			removed = append(removed, op.hash)
		}
	}
	l.ops = l.ops[:0]
	clear(l.at)
	return stored, removed
}

// pending is the number of live operations.
func (l *eventLog) pending() int { return len(l.at) }
