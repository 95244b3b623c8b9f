package client_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/internal/testwait"
	"github.com/prefixroute/prefixroute/pkg/client"
)

// benchPool starts a sidecar with n instances of pool m, half of them
// holding the benchmark prompt's first half, and returns a Picker on it.
func benchPool(b *testing.B, n int, prompt []uint32) *client.Picker {
	b.Helper()
	s := startSidecar(b, "127.0.0.1:0", "")
	cc := dial(b, s.addr)
	p, err := client.NewPicker(cc, client.PickerOptions{Pool: "m", Timeout: 5 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	hashes := p.Hashes(nil, &client.Request{Tokens: prompt})
	for i := range n {
		r, err := client.NewReporter(cc, client.ReporterOptions{Pool: "m", Deployment: fmt.Sprintf("d%d", i%2),
			InstanceID: fmt.Sprintf("i-%d", i), Address: fmt.Sprintf("10.0.0.%d:8000", i), Load: idle,
			CacheEvents: true, Logger: quiet})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { closeReporter(b, r) })
		if i%2 == 0 {
			r.Stored(hashes[:len(hashes)/2]...)
		}
	}
	testwait.EventuallyOK(b, func() string {
		res, err := p.Pick(context.Background(), client.Request{Tokens: prompt, Audit: pb.AuditLevel_AUDIT_LEVEL_FULL})
		if got := len(res.Response.GetDecision().GetInstances()); err != nil || got != n {
			return fmt.Sprintf("a full-audit pick lists %d of the %d instances (%v)", got, n, err)
		}
		return ""
	})
	return p
}

// BenchmarkPick is one Pick through a real sidecar on loopback, hashing
// included: the latency a gateway pays per request, with the full audit
// (the default) and with none.
func BenchmarkPick(b *testing.B) {
	b.Run("instances=64/tokens=8192/audit=none", func(b *testing.B) {
		prompt := iota32(1, 8192)
		p := benchPool(b, 64, prompt)
		ctx := context.Background()
		b.ReportAllocs()
		for b.Loop() {
			if _, err := p.Pick(ctx, client.Request{Tokens: prompt, Audit: pb.AuditLevel_AUDIT_LEVEL_NONE}); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, tc := range []struct{ instances, tokens int }{{8, 2048}, {64, 8192}} {
		b.Run(fmt.Sprintf("instances=%d/tokens=%d", tc.instances, tc.tokens), func(b *testing.B) {
			prompt := iota32(1, tc.tokens)
			p := benchPool(b, tc.instances, prompt)
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if _, err := p.Pick(ctx, client.Request{Tokens: prompt}); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("instances=%d/tokens=%d/parallel", tc.instances, tc.tokens), func(b *testing.B) {
			prompt := iota32(1, tc.tokens)
			p := benchPool(b, tc.instances, prompt)
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := p.Pick(ctx, client.Request{Tokens: prompt}); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkFallback is the static choice over 64 endpoints when the sidecar
// is down (the failed call's cost is the connection's, not measured here).
func BenchmarkFallback(b *testing.B) {
	eps := make([]client.Endpoint, 64)
	for i := range eps {
		eps[i] = client.Endpoint{InstanceID: fmt.Sprintf("i-%d", i), Address: fmt.Sprintf("10.0.0.%d:8000", i)}
	}
	b.ReportAllocs()
	for b.Loop() {
		client.Rendezvous(eps, 0x1234, true, nil)
	}
}
