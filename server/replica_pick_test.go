package server_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/internal/natstest"
	"github.com/prefixroute/prefixroute/internal/servertest"
	"github.com/prefixroute/prefixroute/scheduler"
)

// TestReplicasPickEventsSpreadLoad: picks fanned out as PickAssigned
// events make optimistic accounting fleet-wide. 8 equal idle instances,
// argmin, prompts without hashes (every pick adds the same prefill work to
// the chosen instance), no reports between picks, picks sent round-robin
// to 3 replicas, each pick's work applied on every replica before the next
// pick. Clustered, argmin then always picks an instance with the least
// assigned work of the whole fleet: every aligned window of 8 picks covers
// the 8 instances once, so each gets exactly n/8. Three daemons that are
// not clustered (each receiving the same reports) only know their own
// picks: in each round the three make the same decision and pile onto one
// instance.
func TestReplicasPickEventsSpreadLoad(t *testing.T) {
	const (
		pool      = "chat"
		nInst     = 8
		nReplicas = 3
		rounds    = 8 // 24 picks: 3 aligned windows of 8
		prompt    = 1000
	)
	// The work of a cold 1000-token pick: 1000·(1 + 500/17000) = 1029 tokens.
	work := uint64(scheduler.WorkTokens(prompt, 0, scheduler.DefaultDoublingContextTokens))
	ids := make([]string, nInst)
	for i := range ids {
		ids[i] = fmt.Sprintf("a-%d", i)
	}
	c := context.Background()

	// window is the largest number of picks one instance got in an
	// aligned window of nInst consecutive picks, over all windows.
	window := func(seq []string) int {
		worst := 0
		for w := 0; w+nInst <= len(seq); w += nInst {
			n := map[string]int{}
			for _, id := range seq[w : w+nInst] {
				n[id]++
				worst = max(worst, n[id])
			}
		}
		return worst
	}
	total := func(seq []string) (map[string]int, int) {
		n := map[string]int{}
		most := 0
		for _, id := range seq {
			n[id]++
			most = max(most, n[id])
		}
		return n, most
	}

	t.Run("clustered", func(t *testing.T) {
		ns := natstest.Start(t)
		rs := startReplicas(t, ns.URL(), nReplicas)
		for i, id := range ids { // instances report to different replicas
			report(rs[i%nReplicas], rep(pool, "a", id))
		}
		v := setArgmin(t, rs[0], pool)
		for _, r := range rs {
			servertest.Eventually(t, "8 instances and argmin on every replica", func() bool {
				p, err := r.Admin.GetPolicy(c, &pb.GetPolicyRequest{Pool: pool})
				return err == nil && p.GetVersion() == v && allOK(r, pool, nInst)
			})
		}
		assigned := func(r *servertest.Sidecar) uint64 {
			var sum uint64
			for _, in := range instances(r, pool) {
				sum += in.GetAssignedTokens()
			}
			return sum
		}
		var seq []string
		var worst, sum time.Duration
		for i := range rounds * nReplicas {
			seed := uint64(i + 1)
			p, err := rs[i%nReplicas].Pick.Pick(c, &pb.PickRequest{Pool: pool, PromptTokens: prompt, Seed: &seed})
			if err != nil {
				t.Fatalf("pick %d: %v", i, err)
			}
			seq = append(seq, p.GetInstanceId())
			// The pick's work is on every replica (the next one first),
			// polled every 0.5 ms to measure the propagation.
			start := time.Now()
			for k := 1; k <= nReplicas; k++ {
				r := rs[(i+k)%nReplicas]
				for assigned(r) != uint64(i+1)*work {
					if time.Since(start) > 10*time.Second {
						t.Fatalf("pick %d: its work not on replica %d after 10 s", i, (i+k)%nReplicas+1)
					}
					time.Sleep(500 * time.Microsecond)
				}
			}
			took := time.Since(start)
			worst, sum = max(worst, took), sum+took
		}
		t.Logf("PickAssigned applied on all replicas after each pick (Pick answered → ListInstances shows it on all 3): mean %v, max %v",
			sum/time.Duration(len(seq)), worst)
		n, most := total(seq)
		w := window(seq)
		t.Logf("clustered: picks per instance %v; max share %d/%d; max share in a window of %d picks %d/%d",
			n, most, len(seq), nInst, w, nInst)
		for _, id := range ids {
			if n[id] != len(seq)/nInst {
				t.Errorf("clustered: %s got %d picks, want exactly %d: %v", id, n[id], len(seq)/nInst, seq)
			}
		}
		if w != 1 {
			t.Errorf("clustered: an instance got %d picks in one window of %d; want 1: %v", w, nInst, seq)
		}
	})

	t.Run("independent", func(t *testing.T) {
		es := make([]*servertest.Sidecar, nReplicas)
		for k := range es {
			es[k] = servertest.Start(t)
			for _, id := range ids { // every daemon receives the same reports
				report(es[k], rep(pool, "a", id))
			}
			setArgmin(t, es[k], pool)
		}
		var seq []string
		for round := range rounds {
			seed := uint64(round + 1)
			var got []string
			for _, e := range es {
				p, err := e.Pick.Pick(c, &pb.PickRequest{Pool: pool, PromptTokens: prompt, Seed: &seed})
				if err != nil {
					t.Fatalf("round %d: %v", round, err)
				}
				got = append(got, p.GetInstanceId())
			}
			if got[0] != got[1] || got[1] != got[2] {
				t.Errorf("round %d: the independent daemons picked %v; want the same instance three times (herding)", round, got)
			}
			seq = append(seq, got...)
		}
		n, most := total(seq)
		w := window(seq)
		t.Logf("independent: picks per instance %v; max share %d/%d; max share in a window of %d picks %d/%d",
			n, most, len(seq), nInst, w, nInst)
		if w < nReplicas {
			t.Errorf("independent: max %d picks of a window on one instance; want at least %d (herding)", w, nReplicas)
		}
	})
}
