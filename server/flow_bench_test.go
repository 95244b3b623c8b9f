package server_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/frontend"
	"github.com/prefixroute/prefixroute/internal/servertest"
)

// flowBenchEnv starts a sidecar with two pools of 16 instances in 4
// deployments, identical but for on_saturation: "ll" least_loaded (the
// path of every pick before flow control) and "q" queue (never
// saturated here: no pick waits). refresh re-sends every report (the
// optimistic accounting starts over).
func flowBenchEnv(b *testing.B) (*servertest.Sidecar, func()) {
	e := servertest.Start(b)
	if _, err := e.Admin.SetPolicy(context.Background(), &pb.SetPolicyRequest{AllowNewPool: true, Pool: "q",
		Policy: &pb.Policy{OnSaturation: pb.OnSaturation_ON_SATURATION_QUEUE}}); err != nil {
		b.Fatal(err)
	}
	var ins []*instance
	var reps []*pb.ReportLoadRequest
	for _, pool := range []string{"ll", "q"} {
		for i := range 16 {
			r := rep(pool, fmt.Sprintf("d%d", i%4), fmt.Sprintf("%s-%02d", pool, i))
			ins = append(ins, report(e, r))
			reps = append(reps, r)
		}
	}
	return e, func() {
		for i, in := range ins {
			in.send(reps[i])
		}
	}
}

// BenchmarkPickQueueNotWaiting: the cost of a pick that does not wait
// under on_saturation queue against the same pick under least_loaded,
// in process (Server.PickFor, no gRPC), blocks of 100 picks alternating
// between the pools; reports ns per pick of each and their ratio.
// Sub-benchmarks of one pool each give -benchmem's allocations.
func BenchmarkPickQueueNotWaiting(b *testing.B) {
	hashes := make([]uint64, 64)
	for i := range hashes {
		hashes[i] = uint64(1000 + i)
	}
	b.Run("alternating", func(b *testing.B) {
		e, refresh := flowBenchEnv(b)
		s, bg := e.D.Server(), context.Background()
		reqs := map[string]*pb.PickRequest{}
		for _, pool := range []string{"ll", "q"} {
			reqs[pool] = &pb.PickRequest{Pool: pool, PrefixHashes: hashes, PromptTokens: 1024, Audit: pb.AuditLevel_AUDIT_LEVEL_CHOSEN}
		}
		var dur [2]time.Duration
		calls := 0
		for i := 0; b.Loop(); i++ {
			for k, pool := range []string{"ll", "q"} {
				if i%2 == 1 {
					pool = []string{"q", "ll"}[k] // alternate which goes first
				}
				t0 := time.Now()
				for range 100 {
					if _, err := s.PickFor(bg, reqs[pool], frontend.PickMeta{}); err != nil {
						b.Fatal(err)
					}
				}
				dur[map[string]int{"ll": 0, "q": 1}[pool]] += time.Since(t0)
			}
			calls += 100
			if i%10 == 9 {
				b.StopTimer()
				refresh()
				b.StartTimer()
			}
		}
		b.ReportMetric(float64(dur[0].Nanoseconds())/float64(calls), "least_loaded-ns/pick")
		b.ReportMetric(float64(dur[1].Nanoseconds())/float64(calls), "queue-ns/pick")
		b.ReportMetric(float64(dur[1])/float64(dur[0]), "queue/least_loaded")
	})
	for _, pool := range []string{"ll", "q"} {
		b.Run("pool="+pool, func(b *testing.B) {
			e, refresh := flowBenchEnv(b)
			s, bg := e.D.Server(), context.Background()
			req := &pb.PickRequest{Pool: pool, PrefixHashes: hashes, PromptTokens: 1024, Audit: pb.AuditLevel_AUDIT_LEVEL_CHOSEN}
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				if _, err := s.PickFor(bg, req, frontend.PickMeta{}); err != nil {
					b.Fatal(err)
				}
				if i%1000 == 999 {
					b.StopTimer()
					refresh()
					b.StartTimer()
				}
			}
		})
	}
}
