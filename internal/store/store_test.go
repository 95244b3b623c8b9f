package store

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prefixroute/prefixroute/scheduler"
)

func TestRoundTripAcrossCloseOpen(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{Now: testClock()})
	if err != nil {
		t.Fatal(err)
	}
	pol := defaultPolicy()
	pol.Strategy = scheduler.Threshold
	pol.LambdaH = 0
	pol.StaleAfter = 1500 * time.Millisecond
	steps := []func() (PoolConfig, error){
		func() (PoolConfig, error) {
			return s.SetWeights("chat", map[string]float64{"a": 1, "b": 9}, 0, "alice")
		},
		func() (PoolConfig, error) {
			return s.SetWeights("chat", map[string]float64{"a": 0, "b": 1}, 1, "alice")
		},
		func() (PoolConfig, error) { return s.SetPolicy("chat", pol, "bob") },
		func() (PoolConfig, error) { return s.SetPolicy("embed", defaultPolicy(), "bob") },
		func() (PoolConfig, error) {
			return s.SetWeights("pool with spaces/ü", map[string]float64{"x": 0.125}, 0, "")
		},
	}
	for i, step := range steps {
		if _, err := step(); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
	}
	want := s.Pools()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2 := openStore(t, dir, Options{})
	got := s2.Pools()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("after reopen:\n got %+v\nwant %+v", got, want)
	}
	chat, _ := s2.Pool("chat")
	if chat.WeightsVersion != 2 || chat.PolicyVersion != 1 || *chat.Policy != pol {
		t.Errorf("chat = %+v; want weights v2, policy v1 %+v", chat, pol)
	}
	if embed, _ := s2.Pool("embed"); embed.Weights != nil || embed.WeightsVersion != 0 {
		t.Errorf("embed weights = %v v%d; want never set", embed.Weights, embed.WeightsVersion)
	}
	if _, ok := s2.Pool("nope"); ok {
		t.Error(`Pool("nope") found`)
	}
}

func TestPoolConfigIsACopy(t *testing.T) {
	s := openStore(t, t.TempDir(), Options{})
	in := map[string]float64{"a": 1}
	p := defaultPolicy()
	ret, err := s.SetWeights("chat", in, 0, "t")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.SetPolicy("chat", p, "t"); err != nil {
		t.Fatal(err)
	}
	in["a"], ret.Weights["a"] = 7, 8
	got, _ := s.Pool("chat")
	got.Weights["a"], got.Policy.LambdaH = 9, 99
	for name, c := range s.Pools() {
		c.Weights["a"] = 10
		_ = name
	}
	final, _ := s.Pool("chat")
	if final.Weights["a"] != 1 || final.Policy.LambdaH != p.LambdaH {
		t.Fatalf("store changed through a returned or given value: %+v", final)
	}
}

func TestSetWeightsCompareAndSet(t *testing.T) {
	s := openStore(t, t.TempDir(), Options{})
	w := map[string]float64{"a": 1}
	tests := []struct {
		name     string
		expected uint64
		wantVer  uint64 // version after the call
		wantErr  string // "" = success
	}{
		{"expected 5 on a new pool", 5, 0, "expected_version 5, current 0"},
		{"unconditional first set", 0, 1, ""},
		{"matching version", 1, 2, ""},
		{"stale version", 1, 2, "expected_version 1, current 2"},
		{"future version", 3, 2, "expected_version 3, current 2"},
		{"unconditional again", 0, 3, ""},
		{"matching after unconditional", 3, 4, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(auditLines(t, s))
			c, err := s.SetWeights("chat", w, tt.expected, "t")
			cur, _ := s.Pool("chat")
			if cur.WeightsVersion != tt.wantVer {
				t.Errorf("version after = %d; want %d", cur.WeightsVersion, tt.wantVer)
			}
			if tt.wantErr == "" {
				if err != nil || c.WeightsVersion != tt.wantVer {
					t.Fatalf("SetWeights = v%d, %v; want v%d, nil", c.WeightsVersion, err, tt.wantVer)
				}
				return
			}
			var vm *VersionMismatchError
			if !errors.Is(err, ErrVersionMismatch) || !errors.As(err, &vm) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("SetWeights error = %v; want ErrVersionMismatch with %q", err, tt.wantErr)
			}
			if vm.Expected != tt.expected || vm.Current != tt.wantVer || vm.Pool != "chat" {
				t.Errorf("VersionMismatchError = %+v", vm)
			}
			if after := len(auditLines(t, s)); after != before {
				t.Errorf("a failed CAS wrote %d audit records", after-before)
			}
		})
	}
}

func TestConcurrentSetWeights(t *testing.T) {
	const n = 32
	tests := []struct {
		name        string
		expected    uint64 // every goroutine's expectedVersion
		wantWinners int
	}{
		{"same expected version: one winner", 1, 1},
		{"unconditional: all win", 0, n},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := openStore(t, t.TempDir(), Options{})
			if _, err := s.SetWeights("chat", map[string]float64{"w": 1}, 0, "setup"); err != nil {
				t.Fatal(err)
			}
			start := make(chan struct{})
			errs := make([]error, n)
			vers := make([]uint64, n)
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() {
					<-start
					c, err := s.SetWeights("chat", map[string]float64{"w": float64(i)}, tt.expected, fmt.Sprint("g", i))
					errs[i], vers[i] = err, c.WeightsVersion
				})
				wg.Go(func() { // readers race with the writers
					<-start
					_ = s.Pools()
					_, _ = s.Pool("chat")
				})
			}
			close(start)
			wg.Wait()
			winners, seen := 0, map[uint64]bool{}
			lastWinner := -1
			for i, err := range errs {
				switch {
				case err == nil:
					winners++
					seen[vers[i]] = true
					if vers[i] == uint64(1+tt.wantWinners) {
						lastWinner = i
					}
				case !errors.Is(err, ErrVersionMismatch):
					t.Errorf("goroutine %d: %v", i, err)
				}
			}
			if winners != tt.wantWinners || len(seen) != winners {
				t.Fatalf("%d winners with %d distinct versions; want %d", winners, len(seen), tt.wantWinners)
			}
			final, _ := s.Pool("chat")
			if final.WeightsVersion != uint64(1+winners) || final.Weights["w"] != float64(lastWinner) {
				t.Errorf("final = %+v; want version %d, weight of goroutine %d", final, 1+winners, lastWinner)
			}
			if got := len(auditLines(t, s)); got != 1+winners {
				t.Errorf("%d audit records; want %d", got, 1+winners)
			}
		})
	}
}

func TestOpenLockedDir(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = Open(dir, Options{})
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), dir) {
		t.Fatalf("second Open = %v; want ErrLocked naming %s", err, dir)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := s.SetWeights("chat", map[string]float64{"a": 1}, 0, "t"); !errors.Is(err, ErrClosed) {
		t.Errorf("SetWeights after Close = %v; want ErrClosed", err)
	}
	s2, err := Open(dir, Options{})
	if err != nil {
		t.Fatalf("Open after Close: %v", err)
	}
	closeStore(t, s2)
}
