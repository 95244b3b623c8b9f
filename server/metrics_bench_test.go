package server

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/frontend"
	"github.com/prefixroute/prefixroute/internal/state"
)

// obsPickServer is a Server without a daemon holding pool "bench": two
// deployments of four instances, one draining, reported at a fixed time.
// With obs it has an observer on a metrics SDK that nobody reads (the cost
// of recording is the same as under the Prometheus reader).
func obsPickServer(tb testing.TB, obs bool) (*Server, time.Time) {
	tb.Helper()
	now := time.Unix(1_800_000_000, 0)
	s, err := New(Options{DataDir: tb.TempDir(), Now: func() time.Time { return now },
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		tb.Fatal(err)
	}
	closeAtEnd(tb, "Server", s)
	pool, err := s.reg.Ensure("bench")
	if err != nil {
		tb.Fatal(err)
	}
	for i := range 8 {
		id := state.Identity{Pool: "bench", Deployment: fmt.Sprintf("d%d", i%2), Instance: fmt.Sprintf("i%d", i),
			Address: fmt.Sprintf("10.0.0.%d:8000", i)}
		sess, err := pool.Connect(now, id)
		if err != nil {
			tb.Fatal(err)
		}
		rep := state.Report{Seq: 1, PrefillTokensPerSecond: 10000, QueuedPrefillTokens: uint64(100 * i), Draining: i == 7}
		if err := sess.Report(now, &rep); err != nil {
			tb.Fatal(err)
		}
	}
	if obs {
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
		tb.Cleanup(func() {
			if err := mp.Shutdown(context.Background()); err != nil {
				tb.Errorf("MeterProvider.Shutdown: %v", err)
			}
		})
		m := mp.Meter("bench")
		o, err := newObserver(m, s.reg, s.opts.Now)
		if err != nil {
			tb.Fatal(err)
		}
		if err := o.registerGauges(m); err != nil {
			tb.Fatal(err)
		}
		s.obs = o
	}
	return s, now
}

// obsPickRequest is a 32-block request with seed 1.
func obsPickRequest() *pb.PickRequest { return obsPickRequestAt(pb.AuditLevel_AUDIT_LEVEL_UNSPECIFIED) }

// obsPickRequestAt is obsPickRequest asking for the audit level.
func obsPickRequestAt(level pb.AuditLevel) *pb.PickRequest {
	h := make([]uint64, 32)
	for i := range h {
		h[i] = uint64(i + 1)
	}
	seed := uint64(1)
	return &pb.PickRequest{Pool: "bench", PrefixHashes: h, PromptTokens: 512, Seed: &seed, Audit: level}
}

// BenchmarkPickHooks measures the Pick handler without the observer
// (hooks=off: the record is handed to a nil observer), with it (hooks=on),
// and through PickFor as every front end calls it (hooks=on+interceptor,
// the name it had when an interceptor did the recording). The difference
// is what the metrics cost a pick.
func BenchmarkPickHooks(b *testing.B) {
	for _, c := range []struct {
		name        string
		obs, interc bool
	}{{"hooks=off", false, false}, {"hooks=on", true, false}, {"hooks=on+interceptor", true, true}} {
		b.Run(c.name, func(b *testing.B) {
			s, _ := obsPickServer(b, c.obs)
			ps := &pickService{s: s}
			req := obsPickRequest()
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				var err error
				if c.interc {
					_, err = s.PickFor(ctx, req, frontend.PickMeta{})
				} else {
					_, err = ps.Pick(ctx, req)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkObserverHooks isolates the recording's own cost per pick:
// observer.done on the record of a prepared decision of the bench pool.
func BenchmarkObserverHooks(b *testing.B) {
	s, now := obsPickServer(b, true)
	pool, err := s.reg.Pool("bench")
	if err != nil {
		b.Fatal(err)
	}
	req := obsPickRequest()
	var pk state.Pick
	sc := newPickScratch()
	sc.pcg.Seed(1, seedStream)
	if err := pool.Pick(now, &state.PickInput{Hashes: req.PrefixHashes, PromptTokens: req.PromptTokens}, sc.rng, &pk); err != nil {
		b.Fatal(err)
	}
	rec := pickRecord{req: req, pool: "bench", pk: &pk, seed: 1, elapsed: time.Microsecond,
		resp: pickResponse(&pk, 1, len(req.PrefixHashes), req.PromptTokens)}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		s.obs.done(ctx, &rec)
	}
}
