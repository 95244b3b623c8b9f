package server_test

import (
	"testing"
	"time"
)

// BenchmarkReplicaLateJoin: replica 3 joins the fleet of
// TestReplicaLateJoinCatchUp (200 instances × 1000 cached blocks) and
// catches up by snapshot; an op is one join until replica 3 holds what
// replica 1 holds. Besides the time it reports the bytes replica 3 moved
// through NATS, and the fleet's net of the background (the load reports
// every 100 ms, sampled for a second before the loop).
func BenchmarkReplicaLateJoin(b *testing.B) {
	f := startJoinFleet(b, 200, 1000)
	fleet := func() int64 { return f.proxies[0].Bytes() + f.proxies[1].Bytes() + f.proxies[2].Bytes() }
	before := fleet()
	sampled := time.Now()
	time.Sleep(time.Second)
	background := float64(fleet()-before) / time.Since(sampled).Seconds() // B/s
	var joiner, net int64
	b.ResetTimer()
	for range b.N {
		j0, f0, start := f.proxies[2].Bytes(), fleet(), time.Now()
		r3, _ := f.join(b)
		d := time.Since(start)
		joiner += f.proxies[2].Bytes() - j0
		net += fleet() - f0 - int64(background*d.Seconds())
		b.StopTimer()
		r3.Stop()
		b.StartTimer()
	}
	b.ReportMetric(float64(joiner)/float64(b.N), "joiner-B/op")
	b.ReportMetric(float64(net)/float64(b.N), "net-B/op")
	b.ReportMetric(background, "background-B/s")
}
