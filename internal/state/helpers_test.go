package state

import (
	"testing"
	"time"
)

// t0 is the fixed base time of every test; tests add durations to it.
var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// newTestPool returns pool "p" of a fresh registry with the given limits.
func newTestPool(t testing.TB, limits Limits) (*Registry, *Pool) {
	t.Helper()
	r := NewRegistry(limits)
	p, err := r.Ensure("p")
	if err != nil {
		t.Fatal(err)
	}
	return r, p
}

// connect opens a session for instance id of deployment dep and applies rep
// (a zero report when nil) at now.
func connect(t testing.TB, p *Pool, now time.Time, dep, id string, rep *Report) *Session {
	t.Helper()
	s, err := p.Connect(now, Identity{Pool: p.Name(), Deployment: dep, Instance: id, Address: id + ":8000"})
	if err != nil {
		t.Fatalf("Connect %s/%s: %v", dep, id, err)
	}
	if rep == nil {
		rep = &Report{}
	}
	if err := s.Report(now, rep); err != nil {
		t.Fatalf("Report %s/%s: %v", dep, id, err)
	}
	return s
}

// mustInvariants fails t when checkInvariants finds a problem.
func mustInvariants(t testing.TB, p *Pool) {
	t.Helper()
	if err := checkInvariants(p); err != nil {
		t.Fatal(err)
	}
}

// statusOf returns the InstanceStatus of id, failing when it is not listed.
func statusOf(t testing.TB, p *Pool, now time.Time, id string) InstanceStatus {
	t.Helper()
	for _, st := range p.Instances(now) {
		if st.Instance == id {
			return st
		}
	}
	t.Fatalf("instance %s not listed", id)
	return InstanceStatus{}
}

// snapIndex returns the snapshot index of instance id in pk.
func snapIndex(t testing.TB, pk *Pick, id string) int {
	t.Helper()
	for i := range pk.Snapshot.Instances {
		if pk.Snapshot.Instances[i].ID == id {
			return i
		}
	}
	t.Fatalf("instance %s not in snapshot", id)
	return -1
}
