package cluster

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prefixroute/prefixroute/internal/natstest"
)

// BenchmarkPublish measures one Publish call (200 B payload, default
// batching: 2 ms / 256 KiB) with a live sender to a real server and no
// subscriber. The outbox may drop if the sender falls behind; the drop
// rate is reported.
func BenchmarkPublish(b *testing.B) {
	ns := natstest.Start(b)
	l := dial(b, Config{URLs: []string{ns.URL()}, Name: "bench"}, Handlers{})
	payload := make([]byte, 200)
	b.ReportAllocs()
	b.SetBytes(int64(len(payload)))
	b.ResetTimer()
	for b.Loop() {
		if err := l.Publish("pool-1", payload); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	_ = l.Flush(context.Background())
	st := l.Stats()
	b.ReportMetric(float64(st.DroppedEvents)/float64(st.DroppedEvents+st.PublishedEvents), "drop-ratio")
	b.ReportMetric(float64(st.PublishedEvents)/float64(max(st.PublishedBatches, 1)), "events/batch")
}

// BenchmarkFanOut measures end-to-end throughput from one link to two
// others: b.N events of 200 B published, then the time until both
// receivers have them. Reports events/s delivered to each receiver and
// the receivers' mean batch lag.
func BenchmarkFanOut(b *testing.B) {
	ns := natstest.Start(b)
	src := dial(b, Config{URLs: []string{ns.URL()}, Name: "src"}, Handlers{})
	var got [2]atomic.Int64
	var sinks [2]*Link
	for i := range sinks {
		sinks[i] = dial(b, Config{URLs: []string{ns.URL()}, Name: string(rune('x' + i))}, Handlers{
			OnEvents: func(_, _ string, _ time.Time, payloads [][]byte) { got[i].Add(int64(len(payloads))) },
		})
	}
	payload := make([]byte, 200)
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	n := 0
	for b.Loop() {
		if err := src.Publish("pool-1", payload); err != nil {
			b.Fatal(err)
		}
		n++
		// Back-pressure for the measurement only (Publish itself never
		// waits): keep at most 4 MiB queued, so nothing is dropped and the
		// number is the sustained rate, not the enqueue rate.
		if n%256 == 0 {
			for open, sealed := src.out.pending(); open+sealed > 4<<20; open, sealed = src.out.pending() {
				time.Sleep(20 * time.Microsecond)
			}
		}
	}
	if err := src.Flush(context.Background()); err != nil {
		b.Fatal(err)
	}
	want := int64(n) - int64(src.Stats().DroppedEvents)
	deadline := time.Now().Add(30 * time.Second)
	for (got[0].Load() < want || got[1].Load() < want) && time.Now().Before(deadline) {
		time.Sleep(100 * time.Microsecond)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	if got[0].Load() < want || got[1].Load() < want {
		b.Fatalf("receivers got %d and %d of %d", got[0].Load(), got[1].Load(), want)
	}
	b.ReportMetric(float64(want)/elapsed.Seconds(), "events/s/receiver")
	b.ReportMetric(float64(sinks[0].Stats().LagEWMA.Microseconds()), "lag-ewma-µs")
	b.ReportMetric(float64(src.Stats().DroppedEvents), "dropped")
	b.ReportMetric(float64(sinks[0].Stats().ReceiveDropped+sinks[1].Stats().ReceiveDropped), "recv-dropped")
}

// BenchmarkEventLatency measures one event at a time: Publish on one link
// until the OnEvents handler of both other links has run. With default
// batching the FlushInterval (2 ms) is part of every op.
func BenchmarkEventLatency(b *testing.B) {
	ns := natstest.Start(b)
	src := dial(b, Config{URLs: []string{ns.URL()}, Name: "src"}, Handlers{})
	done := make(chan struct{}, 2)
	for _, name := range []string{"x", "y"} {
		dial(b, Config{URLs: []string{ns.URL()}, Name: name}, Handlers{
			OnEvents: func(string, string, time.Time, [][]byte) { done <- struct{}{} },
		})
	}
	payload := make([]byte, 200)
	for b.Loop() {
		if err := src.Publish("pool-1", payload); err != nil {
			b.Fatal(err)
		}
		<-done
		<-done
	}
}
