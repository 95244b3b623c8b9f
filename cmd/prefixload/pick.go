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

// measure warms up, then runs the Pick loops for the window d and counts
// the reports sent meanwhile that the daemon acked (waiting for their acks
// after the window, at most the ack interval and 5 s).
func (l *load) measure(ctx context.Context, d time.Duration) *result {
	time.Sleep(l.c.warmUp)
	res := &result{}
	var picks, pickErrs atomic.Int64
	var wg sync.WaitGroup
	lat := make([][]time.Duration, l.c.pickers)
	const family = "prefixroute_pick_duration_seconds"
	h0, herr := scrapeHistogram(l.httpAddr, family)
	cpu0, self0 := l.daemonCPU(), selfCPU()
	sent0, start := l.sent.Load(), time.Now()
	done := make(chan struct{}) // closed at the window's end
	wg.Go(func() {
		l.c.clock.window(ctx, d)
		close(done)
	})
	over := func() bool {
		select {
		case <-done:
			return true
		default:
			return ctx.Err() != nil
		}
	}
	var tokens chan struct{} // open loop: one token per Pick due
	if l.c.pickRate > 0 {
		tokens = make(chan struct{}, max(1, l.c.pickers))
		wg.Go(func() {
			defer close(tokens)
			issued := int64(0)
			issue := func(due int64) {
				for ; issued < due; issued++ {
					select {
					case tokens <- struct{}{}:
						res.offered++
					default:
						res.offered++
						res.notSent++ // every caller busy: the generator cannot keep up
					}
				}
			}
			for !over() {
				issue(int64(time.Since(start).Seconds() * l.c.pickRate))
				time.Sleep(time.Millisecond)
			}
			if ctx.Err() == nil {
				issue(int64(d.Seconds() * l.c.pickRate)) // the window's last ones
			}
		})
	}
	for w := range l.c.pickers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 2))
			client := pb.NewPickServiceClient(l.pickConns[w%len(l.pickConns)])
			hashes := make([]uint64, 0, docBlocks+4)
			for {
				if tokens != nil { // open loop: every token is a Pick
					if _, ok := <-tokens; !ok {
						return
					}
				} else if over() {
					return
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
	sent1 := l.sent.Load()
	for until := time.Now().Add(l.c.ackInterval + 5*time.Second); l.acks.Load() < sent1 && time.Now().Before(until) && ctx.Err() == nil; {
		time.Sleep(5 * time.Millisecond)
	}
	res.acks = max(0, min(l.acks.Load(), sent1)-sent0)
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
