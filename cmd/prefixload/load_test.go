package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// TestQuantiles: the exact quantiles of the client-side latencies and the
// interpolated ones of a Prometheus histogram.
func TestQuantiles(t *testing.T) {
	s := []time.Duration{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	if quantile(s, 0.5) != 6 || quantile(s, 0.99) != 10 || quantile(s, 1) != 10 || quantile(nil, 0.5) != 0 {
		t.Errorf("quantiles of 1..10: %v %v", quantile(s, 0.5), quantile(s, 0.99))
	}
	// 100 observations: 50 under 1 ms, 40 more under 2 ms, 10 under 10 ms.
	h := histogram{0.001: 50, 0.002: 90, 0.01: 100, 1e308: 100}
	old := histogram{0.001: 0, 0.002: 0, 0.01: 0, 1e308: 0}
	for _, tc := range []struct {
		q    float64
		want time.Duration
	}{{0.5, time.Millisecond}, {0.7, 1500 * time.Microsecond}, {0.95, 6 * time.Millisecond}} {
		if got := h.minus(old).quantile(tc.q); got != tc.want {
			t.Errorf("q%v = %v, want %v", tc.q, got, tc.want)
		}
	}
}

// TestSmoke runs a one-second load test of 20 streams against a freshly
// built prefixrouted, 20 reports each in the window: no errors, every
// report acked, picks counted, memory read.
func TestSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	bin := buildDaemon(t)
	c := config{daemon: bin, streams: 20, conns: 4, rate: 20, pickers: 2, pools: 2, duration: time.Second,
		auth: true, events: 2, warmUp: 100 * time.Millisecond, deps: 2, capacity: 4096, ackInterval: time.Second,
		clock: newStepClock(20, 20)}
	o, err := run(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	res := o.(*result)
	var out bytes.Buffer
	res.print(&out, c)
	if res.errors() != 0 || res.acks != 20*20 || res.picks == 0 || res.hwmKB <= 0 || res.server == nil {
		t.Errorf("smoke run:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "| errors (picks + stream sends + streams ended) | 0 (0 + 0 + 0) |") {
		t.Errorf("report:\n%s", out.String())
	}
}

// TestSmokeBatch runs the smoke test's 20 instances on ReportLoadBatch
// streams of 8 (the last one 4), with a tokens file: each of the 3 streams
// sends 20 messages in the window, and every report is acked by its
// instance's seq, nothing ended.
func TestSmokeBatch(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	bin := buildDaemon(t)
	c := config{daemon: bin, streams: 20, conns: 2, rate: 20, pickers: 2, pools: 2, duration: time.Second,
		auth: true, events: 4, warmUp: 100 * time.Millisecond, deps: 2, capacity: 4096, batch: 8, ackInterval: 50 * time.Millisecond,
		clock: newStepClock(3, 20)}
	o, err := run(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	res := o.(*result)
	var out bytes.Buffer
	res.print(&out, c)
	if res.errors() != 0 || res.acks != 20*20 || res.picks == 0 {
		t.Errorf("batch run (acks %d):\n%s", res.acks, out.String())
	}
	if !strings.Contains(out.String(), "20 instances (8 per ReportLoadBatch stream and message)") {
		t.Errorf("report:\n%s", out.String())
	}
}

// TestSmokeOpenLoop runs one second at 200 Picks/s offered over 8
// deployments: exactly the 200 Picks due are offered, each sent or
// counted as not sent, 16 streams x 10 reports acked, and both CPU times
// are read.
func TestSmokeOpenLoop(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	bin := buildDaemon(t)
	c := config{daemon: bin, streams: 16, conns: 2, rate: 10, pickers: 4, pools: 1, duration: time.Second,
		auth: false, events: 8, warmUp: 100 * time.Millisecond, deps: 8, capacity: 64, pickRate: 200, ackInterval: time.Second,
		clock: newStepClock(16, 10)}
	o, err := run(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	res := o.(*result)
	var out bytes.Buffer
	res.print(&out, c)
	if res.errors() != 0 || res.offered != 200 || res.picks != res.offered-res.notSent || res.acks != 16*10 ||
		res.windowCPU <= 0 || res.selfCPU <= 0 {
		t.Errorf("open-loop run (offered %d, not sent %d, picks %d, acks %d, CPU %v / %v):\n%s",
			res.offered, res.notSent, res.picks, res.acks, res.windowCPU, res.selfCPU, out.String())
	}
	if !strings.Contains(out.String(), "200 Picks/s offered") || !strings.Contains(out.String(), "1 pools x 8 deployments") {
		t.Errorf("report:\n%s", out.String())
	}
}

// TestSmokeCPUPerCall runs --cpu-per-call with one block of each kind
// against a freshly built prefixrouted with a tokens file: every call
// answered, each kind's CPU read from the daemon's threads.
func TestSmokeCPUPerCall(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	bin := buildDaemon(t)
	c := config{daemon: bin, streams: 8, conns: 1, rate: 10, pools: 1, duration: time.Second, auth: true,
		events: 8, warmUp: 100 * time.Millisecond, deps: 4, capacity: 512, cpuPerCall: perCallBlock}
	o, err := run(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	res := o.(*perCallResult)
	var out bytes.Buffer
	res.print(&out, c)
	if res.empty.calls != 3*perCallBlock || len(res.picks) != 3 || res.empty.cpu <= 0 {
		t.Fatalf("empty calls %d (want %d), %d Pick kinds, empty CPU %v:\n%s", res.empty.calls, 3*perCallBlock, len(res.picks), res.empty.cpu, out.String())
	}
	for _, p := range res.picks {
		if p.calls != perCallBlock || p.cpu <= 0 {
			t.Errorf("%s: %d calls, CPU %v", p.name, p.calls, p.cpu)
		}
	}
	if !strings.Contains(out.String(), "| Pick CHOSEN | 500 |") {
		t.Errorf("report:\n%s", out.String())
	}
}
