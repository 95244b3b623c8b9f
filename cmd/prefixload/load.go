package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/metadata"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/pkg/client"
)

// Each pool has docs prompts of docBlocks chained blocks; instances report
// blocks of them as cached, gateways pick with prefixes of them.
const (
	docs      = 64
	docBlocks = 32
)

// blockHash is block b of prompt doc in pool p (distinct for every triple).
func blockHash(p, doc, b int) uint64 { return uint64(p+1)<<40 | uint64(doc)<<20 | uint64(b+1) }

// load is one running load test. Its counters are safe for concurrent use.
type load struct {
	c         config
	daemon    *daemon
	httpAddr  string // the daemon's /metrics
	conns     []*grpc.ClientConn
	pickConns []*grpc.ClientConn
	streams   []pb.LoadService_ReportLoadClient
	ctx       context.Context
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	stopping  atomic.Bool
	stop      chan struct{} // closed with stopping set: wakes the senders
	acks      atomic.Int64  // reports acked (the first of each instance aside)
	sent      atomic.Int64  // reports sent (the first of each instance aside)
	sendErrs  atomic.Int64
	streamErr atomic.Int64
	errMu     sync.Mutex
	firstErrs []string
}

func (l *load) fail(counter *atomic.Int64, what string, err error) {
	counter.Add(1)
	l.errMu.Lock()
	if len(l.firstErrs) < 10 {
		l.firstErrs = append(l.firstErrs, what+": "+err.Error())
	}
	l.errMu.Unlock()
}

// newLoad dials the connections.
func newLoad(ctx context.Context, c config, d *daemon) (*load, error) {
	if c.clock == nil {
		c.clock = wallClock{}
	}
	l := &load{c: c, daemon: d, httpAddr: d.http, stop: make(chan struct{})}
	l.ctx, l.cancel = context.WithCancel(ctx)
	n := c.conns
	if n <= 0 || n > c.streams {
		n = c.streams
	}
	dial := func() (*grpc.ClientConn, error) { return client.Dial(d.addr) } // what agents and gateways use
	for range n {
		cc, err := dial()
		if err != nil {
			return nil, err
		}
		l.conns = append(l.conns, cc)
	}
	for range max(1, min(4, c.pickers)) {
		cc, err := dial()
		if err != nil {
			return nil, err
		}
		l.pickConns = append(l.pickConns, cc)
	}
	// The Pick connections are up before the window: a Pick must not pay
	// for a handshake the streams' opening delayed.
	wait, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for i, cc := range l.pickConns {
		cc.Connect()
		for st := cc.GetState(); st != connectivity.Ready; st = cc.GetState() {
			if !cc.WaitForStateChange(wait, st) {
				return nil, fmt.Errorf("pick connection %d: not ready within 60 s (%v)", i, st)
			}
		}
	}
	return l, nil
}

// daemonCPU is the daemon's CPU time so far.
func (l *load) daemonCPU() time.Duration { return l.daemon.cpu() }

// authed adds the bearer token when the daemon runs with a tokens file.
func (l *load) authed(ctx context.Context, token string) context.Context {
	if !l.c.auth {
		return ctx
	}
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
}

// connect opens every stream and waits for the ack of its first report,
// then starts its sender and receiver.
func (l *load) connect(ctx context.Context) error {
	if l.c.batch > 1 {
		return l.connectBatch()
	}
	l.streams = make([]pb.LoadService_ReportLoadClient, l.c.streams)
	err := openAll(len(l.streams), 64, func(i int) error {
		st, err := pb.NewLoadServiceClient(l.conns[i%len(l.conns)]).ReportLoad(l.authed(l.ctx, instanceToken))
		if err != nil {
			return err
		}
		if err := st.Send(l.identity(i)); err != nil {
			return fmt.Errorf("stream %d: first report: %w", i, err)
		}
		if _, err := st.Recv(); err != nil {
			return fmt.Errorf("stream %d: first ack: %w", i, err)
		}
		l.streams[i] = st
		return nil
	})
	if err != nil {
		return err
	}
	for i, st := range l.streams {
		l.wg.Add(2)
		go l.send(i, st)
		go l.receive(i, st)
	}
	return nil
}

// openAll runs open(0..n-1), at most par at a time, and returns the first
// error.
func openAll(n, par int, open func(i int) error) error {
	var (
		wg    sync.WaitGroup
		sem   = make(chan struct{}, par)
		errMu sync.Mutex
		first error
	)
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := open(i); err != nil {
				errMu.Lock()
				first = cmp.Or(first, err)
				errMu.Unlock()
			}
		})
	}
	wg.Wait()
	return first
}

// send reports every 1/rate (from a random phase) until the test stops.
func (l *load) send(i int, st pb.LoadService_ReportLoadClient) {
	defer l.wg.Done()
	rng := rand.New(rand.NewPCG(uint64(i), 1))
	every := time.Duration(float64(time.Second) / l.c.rate)
	t := l.c.clock.ticker(every, time.Duration(rng.Int64N(int64(every))))
	defer t.stop()
	pool := i % l.c.pools
	stored := make([]uint64, l.c.events)
	for seq := uint64(2); ; seq++ {
		if !t.wait(l.ctx, l.stop) {
			return
		}
		if l.stopping.Load() {
			st.CloseSend()
			return
		}
		doc, at := rng.IntN(docs), rng.IntN(docBlocks)
		for k := range stored {
			stored[k] = blockHash(pool, doc, (at+k)%docBlocks)
		}
		m := &pb.ReportLoadRequest{Seq: seq, RunningRequests: uint32(rng.IntN(8)), WaitingRequests: uint32(rng.IntN(4)),
			QueuedPrefillTokens: uint64(rng.IntN(4000)), KvCacheUsage: rng.Float64() * 0.8,
			PrefillTokensPerSecond: 8000, StoredBlockHashes: stored}
		err := st.Send(m)
		if err == nil {
			l.sent.Add(1)
		}
		t.handled()
		if err != nil {
			if !l.stopping.Load() {
				l.fail(&l.sendErrs, fmt.Sprintf("stream %d send", i), err)
			}
			return
		}
	}
}

// receive counts the reports acked until the stream ends (an ack covers
// every report up to its seq; the first report's was counted by connect);
// an end before the test stops is an error.
func (l *load) receive(i int, st pb.LoadService_ReportLoadClient) {
	defer l.wg.Done()
	last := uint64(1)
	for {
		ack, err := st.Recv()
		if err != nil {
			if !l.stopping.Load() || !errors.Is(err, io.EOF) && l.ctx.Err() == nil {
				l.fail(&l.streamErr, fmt.Sprintf("stream %d", i), err)
			}
			return
		}
		if seq := ack.GetSeq(); seq > last {
			l.acks.Add(int64(seq - last))
			last = seq
		}
	}
}

// close ends the streams and connections.
func (l *load) close() {
	l.stopping.Store(true)
	close(l.stop)
	done := make(chan struct{})
	go func() { l.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
	}
	l.cancel()
	for _, cc := range append(l.conns, l.pickConns...) {
		cc.Close()
	}
}
