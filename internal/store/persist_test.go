package store

import (
	"bytes"
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func (f *faultFS) setRules(rules ...*faultRule) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rules = rules
}

// TestPersistFailure makes each write of a change fail in turn and checks
// that the change did not happen: error wrapping ErrPersist, memory, state
// file and audit log as before, no temporary file left, and the next
// attempt succeeding with the next version.
func TestPersistFailure(t *testing.T) {
	tests := []struct {
		name    string
		rules   []*faultRule
		wantMsg string
		broken  bool // restoring the state file fails too
	}{
		{"create temp file", []*faultRule{{op: "open", target: "tmp"}}, stateFileName + ": injected fault", false},
		{"write temp file", []*faultRule{{op: "write", target: "tmp"}}, "injected", false},
		{"sync temp file", []*faultRule{{op: "sync", target: "tmp"}}, "injected", false},
		{"close temp file", []*faultRule{{op: "close", target: "tmp"}}, "injected", false},
		{"rename", []*faultRule{{op: "rename", target: "tmp"}}, "injected", false},
		{"sync dir after rename", []*faultRule{{op: "sync", target: "dir"}}, "sync dir", false},
		{"open audit log", []*faultRule{{op: "open", target: "audit"}}, "open audit log", false},
		{"stat audit log", []*faultRule{{op: "stat", target: "audit"}}, "stat audit log", false},
		{"write audit log half-way", []*faultRule{{op: "write", target: "audit"}}, "write audit log", false},
		{"sync audit log", []*faultRule{{op: "sync", target: "audit"}}, "sync audit log", false},
		{"audit log fails, then the restore fails",
			[]*faultRule{{op: "write", target: "audit"}, {op: "rename", target: "tmp", skip: 1}, // existing: the restore renames
				{op: "remove", target: "state"}}, // fresh: the restore removes
			"restoring the previous", true},
	}
	changes := []struct {
		name   string
		change func(s *Store, version uint64) (PoolConfig, error)
	}{
		{"weights", func(s *Store, v uint64) (PoolConfig, error) {
			return s.SetWeights("chat", map[string]float64{"a": 2, "b": 0}, v, "t")
		}},
		{"policy", func(s *Store, _ uint64) (PoolConfig, error) {
			p := defaultPolicy()
			p.DeltaMs = 35
			return s.SetPolicy("chat", p, "t")
		}},
	}
	for _, existing := range []bool{false, true} {
		for _, ch := range changes {
			for _, tt := range tests {
				prefix := "fresh/"
				if existing {
					prefix = "existing/"
				}
				t.Run(prefix+ch.name+"/"+tt.name, func(t *testing.T) {
					dir := t.TempDir()
					ffs := &faultFS{}
					s := openStore(t, dir, Options{fs: ffs})
					if existing {
						if _, err := s.SetWeights("chat", map[string]float64{"a": 1}, 0, "setup"); err != nil {
							t.Fatal(err)
						}
						if _, err := s.SetPolicy("other", defaultPolicy(), "setup"); err != nil {
							t.Fatal(err)
						}
					}
					statePath := filepath.Join(dir, stateFileName)
					before, beforeState, beforeAudit := s.Pools(), readFile(t, statePath), readFile(t, s.AuditLogPath())
					old, _ := s.Pool("chat")

					rules := make([]*faultRule, len(tt.rules))
					for i, r := range tt.rules {
						copied := *r // the table is shared by every subtest
						rules[i] = &copied
					}
					ffs.setRules(rules...)
					_, err := ch.change(s, old.WeightsVersion)
					if !errors.Is(err, ErrPersist) || !strings.Contains(err.Error(), errInjected.Error()) ||
						!strings.Contains(err.Error(), tt.wantMsg) {
						t.Fatalf("change = %v; want ErrPersist containing %q", err, tt.wantMsg)
					}
					if rules[0].fired == 0 { // the others are for the restore, the message shows it failed
						t.Errorf("rule %+v never fired", *rules[0])
					}
					if got := s.Pools(); !reflect.DeepEqual(got, before) {
						t.Errorf("memory changed:\n got %+v\nwant %+v", got, before)
					}
					if got := readFile(t, s.AuditLogPath()); !bytes.Equal(got, beforeAudit) {
						t.Errorf("audit log changed:\n got %q\nwant %q", got, beforeAudit)
					}
					if readFile(t, statePath+".tmp") != nil && !tt.broken {
						t.Error("temporary state file left behind")
					}
					// When the restore failed too, the state file holds the new
					// config until the next successful change.
					if got := readFile(t, statePath); !tt.broken && !bytes.Equal(got, beforeState) {
						t.Errorf("state file changed:\n got %s\nwant %s", got, beforeState)
					}

					ffs.setRules()
					c, err := ch.change(s, old.WeightsVersion)
					if err != nil {
						t.Fatalf("retry: %v", err)
					}
					if c.WeightsVersion+c.PolicyVersion != old.WeightsVersion+old.PolicyVersion+1 {
						t.Errorf("retry: versions %d/%d; want one more than %d/%d",
							c.WeightsVersion, c.PolicyVersion, old.WeightsVersion, old.PolicyVersion)
					}
					if n := len(auditLines(t, s)); n != bytes.Count(beforeAudit, []byte("\n"))+1 {
						t.Errorf("%d audit records after the retry", n)
					}
					want := s.Pools()
					closeStore(t, s)
					if got := openStore(t, dir, Options{}).Pools(); !reflect.DeepEqual(got, want) {
						t.Errorf("after reopen:\n got %+v\nwant %+v", got, want)
					}
				})
			}
		}
	}
}
