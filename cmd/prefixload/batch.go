package main

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"time"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
)

// agent is one --batch group: the instances a node agent reports for on one
// ReportLoadBatch stream, each with its own seq.
type agent struct {
	n     int // the group's number
	first int // its first instance
	size  int
	st    pb.LoadService_ReportLoadBatchClient
	last  map[string]uint64 // instance id -> seq acked so far; the receiver's
}

// identity is instance i's first report, as connect sends it.
func (l *load) identity(i int) *pb.ReportLoadRequest {
	return &pb.ReportLoadRequest{Pool: fmt.Sprint("pool-", i%l.c.pools), Deployment: fmt.Sprintf("d%02d", i/l.c.pools%l.c.deps),
		InstanceId: fmt.Sprint("i-", i), Address: fmt.Sprintf("127.0.0.1:%d", 10000+i%50000), Seq: 1,
		PrefillTokensPerSecond: 8000, KvCapacityBlocks: l.c.capacity, BlockSizeTokens: 16, ReportsCacheEvents: true,
		AckIntervalMs: uint32(l.c.ackInterval.Milliseconds())}
}

// connectBatch opens a ReportLoadBatch stream for every --batch instances,
// each opened by one message with their first reports and acked at once,
// then starts its sender and receiver.
func (l *load) connectBatch() error {
	var agents []*agent
	for i := 0; i < l.c.streams; i += l.c.batch {
		agents = append(agents, &agent{n: len(agents), first: i, size: min(l.c.batch, l.c.streams-i), last: map[string]uint64{}})
	}
	err := openAll(len(agents), 16, func(n int) error {
		a := agents[n]
		st, err := pb.NewLoadServiceClient(l.conns[a.n%len(l.conns)]).ReportLoadBatch(l.authed(l.ctx, instanceToken))
		if err != nil {
			return err
		}
		m := &pb.ReportLoadBatchRequest{AckIntervalMs: uint32(l.c.ackInterval.Milliseconds())}
		for i := a.first; i < a.first+a.size; i++ {
			m.Reports = append(m.Reports, l.identity(i))
		}
		if err := st.Send(m); err != nil {
			return fmt.Errorf("batch stream %d: first message: %w", a.n, err)
		}
		r, err := st.Recv()
		if err != nil {
			return fmt.Errorf("batch stream %d: first acks: %w", a.n, err)
		}
		if len(r.GetEnded()) > 0 || len(r.GetAcks()) != a.size {
			return fmt.Errorf("batch stream %d: first answer has %d acks for %d instances, ends %v", a.n, len(r.GetAcks()), a.size, r.GetEnded())
		}
		for _, k := range r.GetAcks() {
			a.last[k.GetInstance().GetInstanceId()] = k.GetAck().GetSeq()
		}
		a.st = st
		return nil
	})
	if err != nil {
		return err
	}
	for _, a := range agents {
		l.wg.Add(2)
		go l.sendBatch(a)
		go l.receiveBatch(a)
	}
	return nil
}

// sendBatch sends one message with a report of each of a's instances every
// 1/rate (from a random phase) until the test stops.
func (l *load) sendBatch(a *agent) {
	defer l.wg.Done()
	rng := rand.New(rand.NewPCG(uint64(a.n), 2))
	every := time.Duration(float64(time.Second) / l.c.rate)
	t := l.c.clock.ticker(every, time.Duration(rng.Int64N(int64(every))))
	defer t.stop()
	m := &pb.ReportLoadBatchRequest{}
	reports := make([]pb.ReportLoadRequest, a.size)
	stored := make([]uint64, a.size*l.c.events)
	for k := range reports {
		i := a.first + k
		reports[k].Pool, reports[k].InstanceId = fmt.Sprint("pool-", i%l.c.pools), fmt.Sprint("i-", i)
		m.Reports = append(m.Reports, &reports[k])
	}
	for seq := uint64(2); ; seq++ {
		if !t.wait(l.ctx, l.stop) {
			return
		}
		if l.stopping.Load() {
			a.st.CloseSend()
			return
		}
		for k, r := range m.Reports {
			pool := (a.first + k) % l.c.pools
			doc, at := rng.IntN(docs), rng.IntN(docBlocks)
			ev := stored[k*l.c.events : (k+1)*l.c.events]
			for e := range ev {
				ev[e] = blockHash(pool, doc, (at+e)%docBlocks)
			}
			r.Seq, r.RunningRequests, r.WaitingRequests = seq, uint32(rng.IntN(8)), uint32(rng.IntN(4))
			r.QueuedPrefillTokens, r.KvCacheUsage = uint64(rng.IntN(4000)), rng.Float64()*0.8
			r.PrefillTokensPerSecond, r.StoredBlockHashes = 8000, ev
		}
		err := a.st.Send(m)
		if err == nil {
			l.sent.Add(int64(a.size))
		}
		t.handled()
		if err != nil {
			if !l.stopping.Load() {
				l.fail(&l.sendErrs, fmt.Sprintf("batch stream %d send", a.n), err)
			}
			return
		}
	}
}

// receiveBatch counts the reports acked until the stream ends; an
// instance ended, or the stream's end before the test stops, is an error.
func (l *load) receiveBatch(a *agent) {
	defer l.wg.Done()
	for {
		r, err := a.st.Recv()
		if err != nil {
			if !l.stopping.Load() || !errors.Is(err, io.EOF) && l.ctx.Err() == nil {
				l.fail(&l.streamErr, fmt.Sprintf("batch stream %d", a.n), err)
			}
			return
		}
		for _, k := range r.GetAcks() {
			id := k.GetInstance().GetInstanceId()
			if seq := k.GetAck().GetSeq(); seq > a.last[id] {
				l.acks.Add(int64(seq - a.last[id]))
				a.last[id] = seq
			}
		}
		for _, e := range r.GetEnded() {
			l.fail(&l.streamErr, fmt.Sprintf("batch stream %d instance %s", a.n, e.GetInstance().GetInstanceId()),
				fmt.Errorf("ended: code %d: %s", e.GetCode(), e.GetMessage()))
		}
	}
}
