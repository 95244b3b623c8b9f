package state

import (
	"errors"
	"testing"
)

// TestConnectIf: a takeover (an open session replaced, or the instance
// moved from another deployment) asks covers with the instance's identity
// where it lives; a refusal changes nothing and is a *TakeoverError, and a
// connect that takes nothing over never asks.
func TestConnectIf(t *testing.T) {
	onlyA := func(cur Identity) bool { return cur.Deployment == "a" }
	for _, tc := range []struct {
		name      string
		closeOld  bool   // the victim's session ended first
		dep       string // the new session's deployment
		covers    Covers
		refused   bool
		asked     bool
		took      Takeover
		wantDep   string
		oldIsDone bool
	}{
		{"move refused", false, "b", func(Identity) bool { return false }, true, true, Takeover{}, "a", false},
		{"move of a disconnected instance refused", true, "b", func(Identity) bool { return false }, true, true, Takeover{}, "a", false},
		{"move allowed by the old deployment", false, "b", onlyA, false, true, Takeover{Live: true, PrevAddress: "i:8000", MovedFrom: "a"}, "b", true},
		{"move with no check", false, "b", nil, false, false, Takeover{Live: true, PrevAddress: "i:8000", MovedFrom: "a"}, "b", true},
		{"replace refused", false, "a", func(Identity) bool { return false }, true, true, Takeover{}, "a", false},
		{"replace allowed", false, "a", onlyA, false, true, Takeover{Live: true, PrevAddress: "i:8000"}, "a", true},
		{"reconnect is no takeover", true, "a", func(Identity) bool { return false }, false, false, Takeover{}, "a", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, p := newTestPool(t, Limits{})
			old := connect(t, p, t0, "a", "i", &Report{Seq: 1, PrefillTokensPerSecond: 1000})
			connect(t, p, t0, "a", "j", &Report{Seq: 1, PrefillTokensPerSecond: 1000, Stored: []uint64{7}})
			if tc.closeOld {
				old.Close(t0)
			}
			asked := false
			var covers Covers
			if tc.covers != nil {
				covers = func(cur Identity) bool {
					asked = true
					if cur.Instance != "i" || cur.Deployment != "a" {
						t.Errorf("covers asked about %+v, want the instance where it lives", cur)
					}
					return tc.covers(cur)
				}
			}
			s, err := p.ConnectIf(t0, Identity{Pool: "p", Deployment: tc.dep, Instance: "i", Address: "evil:1"}, covers)
			var te *TakeoverError
			switch {
			case tc.refused && (!errors.Is(err, ErrTakeoverRefused) || !errors.As(err, &te) || te.From != "a" || te.To != tc.dep):
				t.Fatalf("ConnectIf = %v, want a TakeoverError from a to %s", err, tc.dep)
			case !tc.refused && err != nil:
				t.Fatalf("ConnectIf: %v", err)
			case !tc.refused:
				if got, _ := s.Takeover(); got != tc.took {
					t.Errorf("Takeover = %+v, want %+v", got, tc.took)
				}
			}
			if asked != tc.asked {
				t.Errorf("covers asked: %v, want %v", asked, tc.asked)
			}
			select {
			case <-old.Done():
				if !tc.oldIsDone {
					t.Error("the old session ended")
				}
			default:
				if tc.oldIsDone {
					t.Error("the old session goes on")
				}
			}
			for _, in := range p.Instances(t0) {
				if in.Instance == "i" && in.Deployment != tc.wantDep {
					t.Errorf("i lives in %q, want %q", in.Deployment, tc.wantDep)
				}
			}
			if n := len(p.Instances(t0)); n != 2 {
				t.Errorf("%d instances, want 2", n)
			}
			mustInvariants(t, p)
		})
	}
}
