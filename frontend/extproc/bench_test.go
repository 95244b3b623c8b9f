package extproc_test

import (
	"context"
	"testing"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/frontend/extproc"
	"github.com/prefixroute/prefixroute/internal/gateway"
)

// BenchmarkExtprocVsPick measures, in one run and on one daemon, what an
// ext_proc decision costs over a gRPC Pick of the same prompt: each
// iteration makes one Pick (the gateway's share included: parsing the
// body and hashing it with internal/gateway, as a gateway calling Pick
// must) and one ext_proc exchange (headers, the body in chunks of at most
// 32 KiB as Envoy sends them, the decision, the body streamed back), both
// over loopback TCP, both at AUDIT_LEVEL_CHOSEN (no fallbacks). It
// reports each one's time per decision and their ratio (extproc/pick).
func BenchmarkExtprocVsPick(b *testing.B) {
	for _, size := range []struct {
		name  string
		bytes int
	}{{"2KiB", 2 << 10}, {"64KiB", 64 << 10}} {
		b.Run(size.name, func(b *testing.B) {
			e := start(b, extproc.Options{Fallbacks: 0})
			for i, d := range []string{"blue", "green", "red", "gold"} {
				e.instance("llama", d, d+"1", "10.0.0."+string(rune('1'+i))+":8000", 0)
				e.instance("llama", d, d+"2", "10.0.1."+string(rune('1'+i))+":8000", 0)
			}
			body := chatBody("llama", size.bytes, 1)
			mapper, err := gateway.NewMapper(gateway.Config{}, nil)
			if err != nil {
				b.Fatal(err)
			}
			msgs := append([]*extprocv3.ProcessingRequest{reqHeaders("POST", "/v1/chat/completions", false, duplex)}, chunked(body, 32<<10)...)
			ctx := context.Background()
			var pickTime, extTime time.Duration
			var req pb.PickRequest
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				if err := mapper.Map(gateway.Request{Path: "/v1/chat/completions", Body: body}, &req); err != nil {
					b.Fatal(err)
				}
				req.Audit = pb.AuditLevel_AUDIT_LEVEL_CHOSEN
				if _, err := e.sc.Pick.Pick(ctx, &req); err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				rs, err := e.exchange(ctx, msgs...)
				if err != nil || len(rs) == 0 || rs[0].GetRequestHeaders() == nil {
					b.Fatalf("ext_proc: %v, %d responses", err, len(rs))
				}
				t2 := time.Now()
				pickTime += t1.Sub(t0)
				extTime += t2.Sub(t1)
			}
			b.StopTimer()
			b.ReportMetric(float64(pickTime.Nanoseconds())/float64(b.N), "pick-ns/op")
			b.ReportMetric(float64(extTime.Nanoseconds())/float64(b.N), "extproc-ns/op")
			b.ReportMetric(float64(extTime)/float64(pickTime), "extproc/pick")
		})
	}
}
