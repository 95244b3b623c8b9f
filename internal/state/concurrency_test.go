package state

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/prefixroute/prefixroute/scheduler"
)

// TestConcurrentPool runs Pick, Session.Report, Connect/Close, SetConfig,
// Sweep and the read-only accessors on one pool from many goroutines (run it
// with -race), checking the invariants while they run and after.
func TestConcurrentPool(t *testing.T) {
	const (
		pickers, picks     = 4, 1000
		reporters, streams = 4, 400
		names              = 40
	)
	_, p := newTestPool(t, Limits{MaxInstancesPerPool: 32})
	deps := []string{"old", "new", "canary"}
	chains := makeChains(rand.New(rand.NewPCG(1, 1)), 16, 32)

	var (
		wg       sync.WaitGroup
		errMu    sync.Mutex
		failures []error
	)
	fail := func(err error) {
		errMu.Lock()
		failures = append(failures, err)
		errMu.Unlock()
	}
	type tracked struct {
		s        *Session
		closedBy bool // we called Close on it
	}
	var sessMu sync.Mutex
	var sessions []*tracked

	for g := range pickers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 100))
			var pk Pick
			for i := range picks {
				hs := randomRequest(rng, chains)
				in := &PickInput{Hashes: hs, PromptTokens: uint32(16*len(hs) + rng.IntN(2000))}
				if rng.IntN(4) == 0 {
					in.Exclude = []string{fmt.Sprint("i", rng.IntN(names))}
				}
				if rng.IntN(4) == 0 {
					q := float64(rng.IntN(100))
					in.Overrides = []Override{{Instance: fmt.Sprint("i", rng.IntN(names)), QueueMs: &q}}
				}
				err := p.Pick(t0.Add(time.Duration(i)*time.Millisecond), in, rng, &pk)
				switch {
				case err == nil:
					if pk.Decision.Instance < 0 || pk.Decision.Instance >= len(pk.Snapshot.Instances) ||
						len(pk.Addresses) != len(pk.Snapshot.Instances) {
						fail(fmt.Errorf("pick: bad decision %d of %d", pk.Decision.Instance, len(pk.Snapshot.Instances)))
						return
					}
				case errors.Is(err, scheduler.ErrNoInstances), errors.Is(err, scheduler.ErrNoEligibleInstance),
					errors.Is(err, scheduler.ErrAllWeightsZero):
				default:
					fail(fmt.Errorf("pick: %v", err))
					return
				}
			}
		}()
	}

	for g := range reporters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 200))
			for i := range streams {
				now := t0.Add(time.Duration(i) * time.Millisecond)
				id := Identity{Pool: "p", Deployment: deps[rng.IntN(len(deps))], Instance: fmt.Sprint("i", rng.IntN(names)), Address: "x"}
				s, err := p.Connect(now, id)
				if errors.Is(err, ErrTooManyInstances) {
					continue
				}
				if err != nil {
					fail(fmt.Errorf("connect: %v", err))
					return
				}
				tr := &tracked{s: s}
				sessMu.Lock()
				sessions = append(sessions, tr)
				sessMu.Unlock()
				exact := rng.IntN(2) == 0
				for range 1 + rng.IntN(4) {
					rep := &Report{ReportsCacheEvents: exact, QueuedPrefillTokens: uint64(rng.IntN(5000)),
						KVCacheUsage: rng.Float64() * 0.9, CacheCleared: rng.IntN(10) == 0}
					if rng.IntN(3) > 0 {
						rep.KVCapacityBlocks = uint64(8 + rng.IntN(64))
					}
					if rng.IntN(8) == 0 {
						exact = !exact // a mode switch
					}
					ch := chains[rng.IntN(len(chains))]
					rep.Stored = ch[:rng.IntN(len(ch)+1)]
					if rng.IntN(2) == 0 {
						ch := chains[rng.IntN(len(chains))]
						rep.Removed = ch[:rng.IntN(len(ch)+1)]
					}
					if err := s.Report(now, rep); err != nil && !errors.Is(err, ErrSessionEnded) {
						fail(fmt.Errorf("report: %v", err))
						return
					}
				}
				if rng.IntN(10) < 7 {
					s.Close(now)
					sessMu.Lock()
					tr.closedBy = true
					sessMu.Unlock()
				}
			}
		}()
	}

	wg.Add(1)
	go func() { // operator
		defer wg.Done()
		rng := rand.New(rand.NewPCG(3, 300))
		for i := range 100 {
			cfg := DefaultConfig()
			cfg.Policy.DefaultKVCapacityBlocks = []uint64{1, 4, 16, 64}[rng.IntN(4)]
			switch rng.IntN(3) {
			case 1:
				cfg.Weights = map[string]float64{"old": 9, "new": 1}
			case 2:
				cfg.Weights = map[string]float64{"old": 0, "new": 0, "canary": float64(rng.IntN(2))}
			}
			cfg.WeightsVersion = uint64(i)
			p.SetConfig(cfg)
		}
	}()

	wg.Add(1)
	go func() { // sweeper and readers
		defer wg.Done()
		rng := rand.New(rand.NewPCG(4, 400))
		for range 100 {
			p.Sweep(t0.Add(time.Duration(rng.IntN(40)) * time.Second))
			if err := checkInvariants(p); err != nil {
				fail(fmt.Errorf("while running: %v", err))
				return
			}
			st := p.Instances(t0)
			_, n := p.Counts()
			_ = len(st) + n
			p.Deployments()
			p.IndexStats()
		}
	}()

	wg.Wait()
	for _, err := range failures {
		t.Error(err)
	}
	mustInvariants(t, p)

	// Every session is either its instance's current one with Done open, or
	// was replaced or forgotten (Done closed), or was closed by its stream.
	p.mu.RLock()
	for i, tr := range sessions {
		current := tr.s.in.session == tr.s && p.slots[tr.s.in.slot] == tr.s.in
		done := isClosed(tr.s.Done())
		switch {
		case current && done:
			t.Errorf("session %d: current but Done closed", i)
		case !current && !tr.closedBy && !done:
			t.Errorf("session %d: replaced or forgotten but Done open", i)
		}
	}
	p.mu.RUnlock()

	// Forgetting everyone empties the index.
	for _, tr := range sessions {
		tr.s.Close(t0)
	}
	p.Sweep(t0.Add(time.Hour))
	if blocks, pairs := p.IndexStats(); blocks != 0 || pairs != 0 {
		t.Fatalf("after forgetting all: index %d/%d", blocks, pairs)
	}
	if d, n := p.Counts(); n != 0 {
		t.Fatalf("after forgetting all: %d deployments, %d instances", d, n)
	}
	mustInvariants(t, p)
}
