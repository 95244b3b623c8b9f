package agent

import (
	"context"
	"encoding/binary"
	"slices"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/vmihailenco/msgpack/v5"
	"google.golang.org/grpc"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/internal/enginemetrics"
	"github.com/prefixroute/prefixroute/internal/kvalign"
	"github.com/prefixroute/prefixroute/internal/kvevents"
	"github.com/prefixroute/prefixroute/internal/testwait"
	"github.com/prefixroute/prefixroute/pkg/client"
)

// benchRouter starts an in-process prefixrouted, sets the weights of pool
// "m" and returns a connection and a Picker.
func benchRouter(b *testing.B) (*grpc.ClientConn, *client.Picker) {
	cc, err := client.Dial(startRouter(b))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cc.Close() })
	if _, err := pb.NewAdminServiceClient(cc).SetWeights(context.Background(), &pb.SetWeightsRequest{AllowNewPool: true, Pool: "m", Weights: map[string]float64{"A": 1}}); err != nil {
		b.Fatal(err)
	}
	p, err := client.NewPicker(cc, client.PickerOptions{Pool: "m", BlockSize: 16, Timeout: 5 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	return cc, p
}

// benchAgent is an agent whose engine counts as up and whose block size
// (16) and load are set without a scrape.
func benchAgent(b testing.TB, cc *grpc.ClientConn, kv string) *Agent {
	a, err := New(cc, Config{Engine: enginemetrics.VLLM, MetricsURL: "http://127.0.0.1:1/metrics", KVEvents: kv,
		Pool: "m", Deployment: "A", InstanceID: "i-1", Address: "10.0.0.1:8000", BlockSize: 16, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	a.lastOK.Store(time.Now().Add(time.Hour).UnixNano())
	a.load = client.Load{KVCapacityBlocks: 1 << 20, BlockSizeTokens: 16, PrefillTokensPerSecond: 10000}
	a.al = kvalign.New(a.seed, 16, 1<<22)
	a.blkOnce.Do(func() { close(a.blk) })
	return a
}

// BenchmarkTranslate64 decodes, aligns and queues for the Reporter one
// 64-block BlockStored batch and its BlockRemoved per iteration (vLLM's
// array form, block size 16), on a live stream to a real router.
func BenchmarkTranslate64(b *testing.B) {
	cc, _ := benchRouter(b)
	a := benchAgent(b, cc, "")
	a.setMode(true)
	b.Cleanup(func() {
		if err := a.rep.Close(); err != nil {
			b.Errorf("Reporter.Close: %v", err)
		}
	})
	st := &eventState{dec: kvevents.NewDecoder()}
	stored, removed, _ := storedBatch(b, 1<<40, 64, 0)
	b.ReportAllocs()
	for b.Loop() {
		if err := a.apply(st, stored); err != nil {
			b.Fatal(err)
		}
		if err := a.apply(st, removed); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(2*64*b.N)/b.Elapsed().Seconds(), "blockevents/s")
}

// BenchmarkPublishToPick measures the delay from a ZeroMQ publish of a
// 64-block BlockStored to the first Pick that matches all 64 blocks on the
// instance: a Go PUB socket on loopback, the agent, a real router. Each
// iteration also publishes the blocks' removal. "sparse" publishes a
// stored/removed pair every 100ms (within the Reporter's early-report
// budget: immediate flushes); "saturated" back to back (every report waits
// FlushGap, 25ms, after the previous one).
func BenchmarkPublishToPick(b *testing.B) {
	b.Run("sparse", func(b *testing.B) { publishToPick(b, 100*time.Millisecond) })
	b.Run("saturated", func(b *testing.B) { publishToPick(b, 0) })
}

func publishToPick(b *testing.B, every time.Duration) {
	cc, picker := benchRouter(b)
	pub := zmq4.NewPub(context.Background())
	b.Cleanup(func() {
		if err := pub.Close(); err != nil {
			b.Errorf("closing the PUB socket: %v", err)
		}
	})
	if err := pub.Listen("tcp://127.0.0.1:0"); err != nil {
		b.Fatal(err)
	}
	a := benchAgent(b, cc, "tcp://"+pub.Addr().String())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	b.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			b.Errorf("Run: %v", err)
		}
	})
	seq := uint64(0)
	publish := func(payload []byte) {
		var s [8]byte
		binary.BigEndian.PutUint64(s[:], seq)
		seq++
		if err := pub.Send(zmq4.NewMsgFrom([]byte{}, s[:], payload)); err != nil {
			b.Fatal(err)
		}
	}
	clear, _ := msgpack.Marshal([]any{1.0, []any{[]any{"AllBlocksCleared"}}, 0})
	// A PUB socket drops what it sends before the subscriber is connected:
	// clear until one arrives.
	testwait.Eventually(b, "the agent precise (a clear received)", func() bool {
		if a.Exact() {
			return true
		}
		publish(clear)
		return false
	})
	var delays []time.Duration
	i := 0
	for b.Loop() {
		if every > 0 {
			b.StopTimer()
			time.Sleep(every)
			b.StartTimer()
		}
		stored, removed, tokens := storedBatch(b, uint64(i)<<20, 64, i*64*16)
		i++
		t0 := time.Now()
		publish(stored)
		for {
			res, err := picker.Pick(context.Background(), client.Request{Tokens: tokens, Audit: pb.AuditLevel_AUDIT_LEVEL_CHOSEN})
			if err != nil {
				b.Fatal(err)
			}
			if res.Response.GetDecision().GetDeployments()[0].GetMatchedBlocks() == 64 {
				break
			}
			if time.Since(t0) > 10*time.Second {
				b.Fatal("stored blocks never visible")
			}
		}
		delays = append(delays, time.Since(t0))
		publish(removed)
	}
	slices.Sort(delays)
	q := func(p float64) float64 { return float64(delays[int(p*float64(len(delays)-1))].Microseconds()) / 1000 }
	b.ReportMetric(q(0.5), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
}

// storedBatch is a vLLM array-form batch of one BlockStored of n blocks of
// 16 tokens, engine hashes base.., and the BlockRemoved of the same blocks.
func storedBatch(b testing.TB, base uint64, n int, firstToken int) (stored, removed []byte, tokens []uint32) {
	hashes, toks := make([]any, n), make([]any, n*16)
	tokens = make([]uint32, n*16)
	for i := range hashes {
		hashes[i] = base + uint64(i)
	}
	for i := range toks {
		toks[i], tokens[i] = firstToken+i, uint32(firstToken+i)
	}
	var err error
	if stored, err = msgpack.Marshal([]any{1.0, []any{[]any{"BlockStored", hashes, nil, toks, 16, nil, "GPU", nil}}, 0}); err != nil {
		b.Fatal(err)
	}
	if removed, err = msgpack.Marshal([]any{1.0, []any{[]any{"BlockRemoved", hashes, "GPU"}}, 0}); err != nil {
		b.Fatal(err)
	}
	return stored, removed, tokens
}
