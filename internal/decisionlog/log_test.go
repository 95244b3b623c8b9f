package decisionlog

import (
	"context"
	"math"
	"path/filepath"
	"sync"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
)

// blockingWriter blocks its first Write until released, and says when it
// started blocking.
type blockingWriter struct {
	entered, release chan struct{}
	n                int
}

func (w *blockingWriter) Write(p []byte) (int, error) {
	if w.n == 0 {
		close(w.entered)
		<-w.release
	}
	w.n++
	return len(p), nil
}

func (w *blockingWriter) Close() error { return nil }

// TestDecisionLogDropsWhenFull holds the writer in the disk: the buffer of
// one record fills and every further pick is dropped and counted, without
// blocking the caller.
func TestDecisionLogDropsWhenFull(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	w := &blockingWriter{entered: make(chan struct{}), release: make(chan struct{})}
	l, err := New(w, 1, 1, mp.Meter("test"))
	if err != nil {
		t.Fatal(err)
	}
	rec := Record{Req: &pb.PickRequest{Pool: "p"}, Resp: &pb.PickResponse{}, Start: time.Now(), Elapsed: time.Microsecond}
	ctx := context.Background()
	l.Add(ctx, rec)
	<-w.entered // the writer holds record 1 in Write
	start := time.Now()
	for range 10 {
		l.Add(ctx, rec)
	}
	if el := time.Since(start); el > time.Second {
		t.Errorf("adding to a full log took %v", el)
	}
	close(w.release)
	if err := l.Close(ctx); err != nil {
		t.Fatal(err)
	}
	sums := counterSums(t, reader)
	if sums["prefixroute_decision_log_records"] != 2 || sums["prefixroute_decision_log_dropped"] != 9 {
		t.Errorf("written %d, dropped %d; want 2 and 9", sums["prefixroute_decision_log_records"], sums["prefixroute_decision_log_dropped"])
	}
}

// TestDecisionLogCloseLosesNothing adds records from several goroutines
// while the log closes, many times over: every record is either written or
// counted as dropped, none is left unaccounted in the buffer after the
// final drain.
func TestDecisionLogCloseLosesNothing(t *testing.T) {
	ctx := context.Background()
	rec := Record{Req: &pb.PickRequest{Pool: "p"}, Resp: &pb.PickResponse{}, Start: time.Now()}
	const rounds, adders, each = 300, 4, 40
	for round := range rounds {
		reader := sdkmetric.NewManualReader()
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
		l, err := New(nopWriteCloser{}, 1, adders*each, mp.Meter("test"))
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for range adders {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range each {
					l.Add(ctx, rec)
				}
			}()
		}
		if err := l.Close(ctx); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		sums := counterSums(t, reader)
		if got := sums["prefixroute_decision_log_records"] + sums["prefixroute_decision_log_dropped"]; got != adders*each {
			t.Fatalf("round %d: %d written + %d dropped = %d of %d records added", round,
				sums["prefixroute_decision_log_records"], sums["prefixroute_decision_log_dropped"], got, adders*each)
		}
		if err := mp.Shutdown(ctx); err != nil {
			t.Errorf("round %d: MeterProvider.Shutdown: %v", round, err)
		}
	}
}

type nopWriteCloser struct{}

func (nopWriteCloser) Write(p []byte) (int, error) { return len(p), nil }
func (nopWriteCloser) Close() error                { return nil }

// counterSums collects the reader's int64 counters, summed over their
// series.
func counterSums(t *testing.T, reader *sdkmetric.ManualReader) map[string]int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	sums := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if s, ok := m.Data.(metricdata.Sum[int64]); ok {
				for _, dp := range s.DataPoints {
					sums[m.Name] += dp.Value
				}
			}
		}
	}
	return sums
}

// TestDecisionLogRate checks the accepted rates and the two exact ones.
func TestDecisionLogRate(t *testing.T) {
	dir := t.TempDir()
	mp := sdkmetric.NewMeterProvider()
	for _, c := range []struct {
		rate    float64
		ok      bool
		sampled bool // for rates 0 and 1
	}{
		{0, true, false}, {1, true, true}, {0.5, true, false},
		{-0.1, false, false}, {1.5, false, false}, {math.NaN(), false, false},
	} {
		l, err := Open(filepath.Join(dir, "d.jsonl"), c.rate, 0, mp.Meter("test"))
		if (err == nil) != c.ok {
			t.Errorf("rate %v: err %v, want ok=%v", c.rate, err, c.ok)
			continue
		}
		if err != nil {
			continue
		}
		if c.rate == 0 || c.rate == 1 {
			for range 100 {
				if l.Sample() != c.sampled {
					t.Errorf("rate %v: Sample() = %v", c.rate, !c.sampled)
					break
				}
			}
		}
		if err := l.Close(context.Background()); err != nil {
			t.Errorf("rate %v: Close: %v", c.rate, err)
		}
	}
}
