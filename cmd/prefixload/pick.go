package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"syscall"
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
	cpu0, self0 := l.daemonCPU(), selfCPU()
	acks0, start := l.acks.Load(), time.Now()
	deadline := start.Add(d)
	var tokens chan struct{} // open loop: one token per Pick due
	if l.c.pickRate > 0 {
		tokens = make(chan struct{}, max(1, l.c.pickers))
		wg.Go(func() {
			defer close(tokens)
			issued := int64(0)
			for now := time.Now(); now.Before(deadline) && ctx.Err() == nil; now = time.Now() {
				for due := int64(now.Sub(start).Seconds() * l.c.pickRate); issued < due; issued++ {
					select {
					case tokens <- struct{}{}:
						res.offered++
					default:
						res.offered++
						res.notSent++ // every caller busy: the generator cannot keep up
					}
				}
				time.Sleep(time.Millisecond)
			}
		})
	}
	for w := range l.c.pickers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 2))
			client := pb.NewPickServiceClient(l.pickConns[w%len(l.pickConns)])
			hashes := make([]uint64, 0, docBlocks+4)
			for time.Now().Before(deadline) && ctx.Err() == nil {
				if tokens != nil {
					if _, ok := <-tokens; !ok {
						return
					}
				}
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
	res.windowCPU, res.selfCPU = l.daemonCPU()-cpu0, selfCPU()-self0
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

// selfCPU is the load generator's own user+system CPU time so far.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
