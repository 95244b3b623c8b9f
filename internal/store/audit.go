package store

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/prefixroute/prefixroute/internal/rollout"
)

// Kinds of audit records.
const (
	kindWeights = "weights"
	kindPolicy  = "policy"
	kindRamp    = "ramp"
)

// auditRecord is one line of the audit log.
type auditRecord struct {
	Time    string `json:"time"` // RFC 3339 with nanoseconds, UTC
	Caller  string `json:"caller"`
	Pool    string `json:"pool"`
	Kind    string `json:"kind"` // kindWeights or kindPolicy
	Old     any    `json:"old"`  // null when never set before
	New     any    `json:"new"`
	Version uint64 `json:"version"` // the new weights or policy version
	Drain   bool   `json:"drain"`   // every new weight is 0
	// Ramp is set on a weights change made by a ramp step, and on every
	// ramp record: which ramp, and what happened to it.
	Ramp *auditRamp `json:"ramp,omitempty"`
}

// auditRamp ties an audit record to a ramp.
type auditRamp struct {
	ID    uint64 `json:"id"`
	Event string `json:"event"` // start, step, pause, resume, abort, done
	Step  int    `json:"step"`  // steps applied after the change
	Steps int    `json:"steps"`
	State string `json:"state"`
}

// newAuditRecord returns the record of a change of pool from old to next.
func newAuditRecord(now time.Time, caller, pool, kind string, old, next PoolConfig) (auditRecord, error) {
	r := auditRecord{
		Time:   now.UTC().Format(time.RFC3339Nano),
		Caller: caller,
		Pool:   pool,
		Kind:   kind,
	}
	switch kind {
	case kindWeights:
		if old.Weights != nil {
			r.Old = old.Weights
		}
		r.New = next.Weights
		r.Version = next.WeightsVersion
		r.Drain = allZero(next.Weights)
		if next.Ramp != nil && (old.Ramp == nil || old.Ramp.Applied != next.Ramp.Applied || old.Ramp.ID != next.Ramp.ID) {
			r.Ramp = newAuditRamp(old.Ramp, next.Ramp)
		}
	case kindRamp:
		if old.Ramp != nil && old.Ramp.ID == next.Ramp.ID {
			r.Old = encodeRamp(old.Ramp)
		}
		r.New = encodeRamp(next.Ramp)
		r.Version = next.Ramp.ID
		r.Ramp = newAuditRamp(old.Ramp, next.Ramp)
	case kindPolicy:
		if old.Policy != nil {
			p, err := encodePolicy(*old.Policy)
			if err != nil {
				return r, err
			}
			r.Old = p
		}
		p, err := encodePolicy(*next.Policy)
		if err != nil {
			return r, err
		}
		r.New = p
		r.Version = next.PolicyVersion
	}
	return r, nil
}

func newAuditRamp(old, next *rollout.Ramp) *auditRamp {
	return &auditRamp{ID: next.ID, Event: rampEvent(old, next), Step: next.Applied, Steps: len(next.Steps), State: next.State.String()}
}

// appendAudit appends r as one JSON line to the audit log at path and
// fsyncs it. On failure it truncates the log back to its previous size (best
// effort), so that a half-written line never precedes the next record.
func appendAudit(fsys fileSystem, path string, r auditRecord) error {
	line, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("encode audit record: %w", err)
	}
	line = append(line, '\n')
	f, err := fsys.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("open audit log: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		_ = f.Close() // the Stat error is the one to report
		return fmt.Errorf("stat audit log: %w", err)
	}
	if _, err = f.Write(line); err != nil {
		err = fmt.Errorf("write audit log: %w", err)
	} else if err = f.Sync(); err != nil {
		err = fmt.Errorf("sync audit log: %w", err)
	} else if fi.Size() == 0 {
		// A new file (first record, or the log was moved aside): make its
		// directory entry durable too.
		err = syncDir(fsys, filepath.Dir(path))
	}
	if err != nil {
		if f.Truncate(fi.Size()) == nil {
			_ = f.Sync()
		}
		_ = f.Close() // err is the one to report
		return err
	}
	// The record is durable: a failing close changes nothing on disk, and
	// reporting it would leave a record of a change that was undone.
	_ = f.Close()
	return nil
}
