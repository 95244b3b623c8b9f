package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
)

// measure warms up, then runs the Pick loops for d and counts what the
// streams ingest meanwhile.
func (l *load) measure(ctx context.Context, d time.Duration) *result {
	time.Sleep(l.c.warmUp)
	res := &result{}
	var picks, pickErrs atomic.Int64
	var wg sync.WaitGroup
	lat := make([][]time.Duration, l.c.pickers)
	const family = "prefixroute_pick_duration_seconds"
	h0, herr := scrapeHistogram(l.httpAddr, family)
	acks0, start := l.acks.Load(), time.Now()
	deadline := start.Add(d)
	for w := range l.c.pickers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 2))
			client := pb.NewPickServiceClient(l.pickConns[w%len(l.pickConns)])
			hashes := make([]uint64, 0, docBlocks+4)
			for time.Now().Before(deadline) && ctx.Err() == nil {
				pool, doc, n := rng.IntN(l.c.pools), rng.IntN(docs), 1+rng.IntN(docBlocks)
				hashes = hashes[:0]
				for b := range n {
					hashes = append(hashes, blockHash(pool, doc, b))
				}
				hashes = append(hashes, rng.Uint64()) // the request's own tail
				req := &pb.PickRequest{Pool: fmt.Sprint("pool-", pool), PrefixHashes: hashes,
					PromptTokens: uint32(len(hashes) * 16), Audit: pb.AuditLevel_AUDIT_LEVEL_CHOSEN}
				cctx, cancel := context.WithTimeout(l.authed(ctx, gatewayToken), 5*time.Second)
				t0 := time.Now()
				_, err := client.Pick(cctx, req)
				el := time.Since(t0)
				cancel()
				picks.Add(1)
				if err != nil {
					l.fail(&pickErrs, "pick", err)
					continue
				}
				lat[w] = append(lat[w], el)
			}
		})
	}
	wg.Wait()
	res.elapsed = time.Since(start)
	res.acks = l.acks.Load() - acks0
	if h1, err := scrapeHistogram(l.httpAddr, family); err == nil && herr == nil {
		res.server = h1.minus(h0)
	}
	res.picks, res.pickErrs = picks.Load(), pickErrs.Load()
	res.sendErrs, res.streamErrs = l.sendErrs.Load(), l.streamErr.Load()
	for _, s := range lat {
		res.latency = append(res.latency, s...)
	}
	l.errMu.Lock()
	res.firstErrs = append(res.firstErrs, l.firstErrs...)
	l.errMu.Unlock()
	return res
}
