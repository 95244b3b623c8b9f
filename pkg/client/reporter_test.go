package client_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/daemon"
	"github.com/prefixroute/prefixroute/internal/servertest"
	"github.com/prefixroute/prefixroute/internal/testwait"
	"github.com/prefixroute/prefixroute/pkg/client"
	"github.com/prefixroute/prefixroute/pkg/prefixhash"
)

// TestReporterReconnectsAfterRestart: the sidecar restarts on the same
// address and data dir mid-stream; the Reporter reconnects under the same
// identity and the new sidecar sees the instance with its cache snapshot,
// including blocks stored while the sidecar was down.
func TestReporterReconnectsAfterRestart(t *testing.T) {
	s := startSidecar(t, "127.0.0.1:0", "")
	cc := dial(t, s.addr)
	seed := prefixhash.Seed("m", "")
	prompt := iota32(100, 16*6)
	hashes := prefixhash.Tokens(nil, seed, 16, prompt)

	r := reporter(t, cc, client.ReporterOptions{Pool: "m", Deployment: "A", InstanceID: "a-1", CacheEvents: true})
	r.Stored(hashes[:4]...)
	cachedBlocks(t, s, cc, "m", "a-1", 4)
	if _, err := pb.NewAdminServiceClient(cc).SetWeights(context.Background(),
		&pb.SetWeightsRequest{AllowNewPool: true, Pool: "m", Weights: map[string]float64{"A": 1}}); err != nil {
		t.Fatal(err)
	}

	s.stop()
	r.Stored(hashes[4:]...) // while the sidecar is down
	testwait.EventuallyOK(t, func() string {
		if r.Stats().Connected {
			return "the Reporter still says connected after the sidecar stopped"
		}
		return ""
	})
	s = s.restart()
	cachedBlocks(t, s, cc, "m", "a-1", uint64(len(hashes)))
	if st := r.Stats(); st.Streams < 2 {
		t.Errorf("Stats().Streams = %d after a restart, want >= 2", st.Streams)
	}
	in := instanceStatus(cc, "m", "a-1")
	if in.GetDeployment() != "A" || in.GetAddress() != "a-1:8000" || !in.GetReportsCacheEvents() {
		t.Errorf("identity after reconnect: %v", in)
	}

	p, err := client.NewPicker(cc, client.PickerOptions{Pool: "m", Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	res, err := p.Pick(context.Background(), client.Request{Tokens: prompt, Seed: u64(1)})
	if err != nil {
		t.Fatal(err)
	}
	if res.Fallback || res.InstanceID != "a-1" {
		t.Fatalf("pick after restart: %+v", res)
	}
	dec := res.Response.GetDecision()
	if got := dec.GetInstances()[0].GetMatchedBlocks(); got != uint32(len(hashes)) {
		t.Errorf("matched_blocks %d after restart, want the snapshot's %d", got, len(hashes))
	}
	if dec.GetWeightsVersion() != 1 {
		t.Errorf("weights version %d after restart, want 1 (durable)", dec.GetWeightsVersion())
	}
}

// TestReporterSnapshotCallback: with a Snapshot callback, every new stream
// opens with what the callback returns.
func TestReporterSnapshotCallback(t *testing.T) {
	s := startSidecar(t, "127.0.0.1:0", "")
	cc := dial(t, s.addr)
	held := make(chan []uint64, 1)
	held <- []uint64{1, 2, 3}
	snapshot := func() []uint64 { h := <-held; held <- h; return h }
	reporter(t, cc, client.ReporterOptions{Pool: "m", Deployment: "A", InstanceID: "a-1",
		CacheEvents: true, Snapshot: snapshot})
	cachedBlocks(t, s, cc, "m", "a-1", 3)
	<-held
	held <- []uint64{1, 2, 3, 4, 5, 6, 7}
	s = s.restart()
	cachedBlocks(t, s, cc, "m", "a-1", 7)
}

// TestReporterEvents: stores, removals and clears reach the sidecar's index
// with the next reports, in order.
func TestReporterEvents(t *testing.T) {
	s := startSidecar(t, "127.0.0.1:0", "")
	cc := dial(t, s.addr)
	r := reporter(t, cc, client.ReporterOptions{Pool: "m", Deployment: "A", InstanceID: "a-1", CacheEvents: true})
	for _, step := range []struct {
		name string
		do   func()
		want uint64
	}{
		{"store 10", func() { r.Stored(1, 2, 3, 4, 5, 6, 7, 8, 9, 10) }, 10},
		{"remove 3", func() { r.Removed(1, 2, 3) }, 7},
		// 9 only when both orders come out right: {4..10, 12, 13}.
		{"store then remove, remove then store", func() {
			r.Stored(11)
			r.Removed(11)
			r.Removed(4, 5)
			r.Stored(4, 5)
			r.Stored(12, 13)
		}, 9},
		{"clear then store 2", func() { r.Cleared(); r.Stored(20, 21) }, 2},
	} {
		step.do()
		t.Run(step.name, func(t *testing.T) { cachedBlocks(t, s, cc, "m", "a-1", step.want) })
	}
}

// TestReporterSplitsEvents: more block events than one message may carry
// go out in several messages, at the sidecar's real limit and at a lower
// one; a Reporter that ignores a lower limit gets its reports rejected.
func TestReporterSplitsEvents(t *testing.T) {
	limit := func(n int) func(*daemon.Config) {
		return func(c *daemon.Config) { c.Server.Limits.MaxBlockEvents = n }
	}
	type split struct {
		name         string
		serverLimit  int // 0: the default, 65536
		clientLimit  int // 0: the default, 65536
		events       int
		wantMessages uint64
		rejected     bool
	}
	cases := []split{
		{"default limit, 2 full messages and a bit", 0, 0, 2*client.MaxEventsPerMessage + 10, 3, false},
		{"exactly the limit", 0, 0, client.MaxEventsPerMessage, 1, false},
		{"lower limit on both sides", 100, 100, 1050, 11, false},
		{"client over the server's limit", 100, 0, 1050, 0, true},
	}
	// The events go out either in the snapshot that opens a stream (stored
	// while no stream was open) or as deltas with a later report.
	for _, path := range []string{"snapshot", "deltas"} {
		for _, tc := range cases {
			t.Run(path+"/"+tc.name, func(t *testing.T) {
				hashes := make([]uint64, tc.events)
				for i := range hashes {
					hashes[i] = uint64(i) * 0x9e3779b97f4a7c15
				}
				addr := servertest.DeadAddr(t)
				cc := dial(t, addr)
				r := reporter(t, cc, client.ReporterOptions{Pool: "m", Deployment: "A", InstanceID: "a-1",
					CacheEvents: true, MaxEventsPerMessage: tc.clientLimit})
				if path == "snapshot" {
					r.Stored(hashes...)
				}
				s := startSidecar(t, addr, "", limit(tc.serverLimit))
				if path == "deltas" {
					testwait.EventuallyOK(t, func() string {
						if !r.Stats().Connected {
							return "the Reporter does not connect"
						}
						return ""
					})
					r.Stored(hashes...)
				}
				if tc.rejected {
					testwait.EventuallyOK(t, func() string {
						if err := r.Stats().LastError; status.Code(err) != codes.InvalidArgument {
							return fmt.Sprintf("LastError %v, want InvalidArgument from the sidecar", err)
						}
						return ""
					})
					return
				}
				cachedBlocks(t, s, cc, "m", "a-1", uint64(tc.events))
				st := r.Stats()
				if st.LastError != nil && !client.Unreachable(st.LastError) {
					t.Errorf("LastError %v", st.LastError)
				}
				if st.Events < uint64(tc.events) || st.Reports < tc.wantMessages {
					t.Errorf("sent %d events in %d messages, want %d events in at least %d",
						st.Events, st.Reports, tc.events, tc.wantMessages)
				}
			})
		}
	}
}

// TestReporterFollowsInterval: the Reporter adopts the report interval the
// sidecar asks for in its acks.
func TestReporterFollowsInterval(t *testing.T) {
	s := startSidecar(t, "127.0.0.1:0", "", func(c *daemon.Config) { c.Server.ReportInterval = 35 * time.Millisecond })
	r := reporter(t, dial(t, s.addr), client.ReporterOptions{Pool: "m", Deployment: "A", InstanceID: "a-1",
		Interval: time.Second})
	testwait.EventuallyOK(t, func() string {
		if st := r.Stats(); st.Interval != 35*time.Millisecond || st.Acks == 0 {
			return fmt.Sprintf("interval %v after %d acks, want the sidecar's 35ms", st.Interval, st.Acks)
		}
		return ""
	})
}

// TestReporterAckInterval: with the default AckInterval (1s) and reports
// every 25 ms the sidecar acks about one report in forty; with a negative
// AckInterval it acks every one.
func TestReporterAckInterval(t *testing.T) {
	s := startSidecar(t, "127.0.0.1:0", "", func(c *daemon.Config) { c.Server.ReportInterval = 25 * time.Millisecond })
	cc := dial(t, s.addr)
	paced := reporter(t, cc, client.ReporterOptions{Pool: "m", Deployment: "A", InstanceID: "a-1"})
	every := reporter(t, cc, client.ReporterOptions{Pool: "m", Deployment: "A", InstanceID: "a-2", AckInterval: -1})
	testwait.EventuallyOK(t, func() string {
		if st := paced.Stats(); st.Reports < 60 || st.Acks == 0 {
			return fmt.Sprintf("paced: %d reports, %d acks; want 60 reports and an ack", st.Reports, st.Acks)
		}
		return ""
	})
	if st := paced.Stats(); st.Acks*10 > st.Reports {
		t.Errorf("paced: %d acks for %d reports, want at most one in ten", st.Acks, st.Reports)
	}
	testwait.EventuallyOK(t, func() string {
		if st := every.Stats(); st.Reports < 20 || st.Acks+2 < st.Reports {
			return fmt.Sprintf("every report: %d acks for %d reports", st.Acks, st.Reports)
		}
		return ""
	})
}

// TestReporterLoad: the Load callback's figures reach the sidecar.
func TestReporterLoad(t *testing.T) {
	s := startSidecar(t, "127.0.0.1:0", "")
	cc := dial(t, s.addr)
	reporter(t, cc, client.ReporterOptions{Pool: "m", Deployment: "A", InstanceID: "a-1", Load: func() client.Load {
		return client.Load{RunningRequests: 3, WaitingRequests: 2, QueuedPrefillTokens: 500, QueueMs: 42, HasQueueMs: true,
			KVCacheUsage: 0.5, KVCapacityBlocks: 2048, PrefillTokensPerSecond: 8000, BlockSizeTokens: 32}
	}})
	testwait.EventuallyOK(t, func() string {
		in := instanceStatus(cc, "m", "a-1")
		if in.GetRunningRequests() != 3 || in.GetWaitingRequests() != 2 || in.GetQueuedPrefillTokens() != 500 ||
			in.GetQueueMs() != 42 || in.GetKvCacheUsage() != 0.5 || in.GetKvCapacityBlocks() != 2048 ||
			in.GetPrefillTokensPerSecond() != 8000 || in.GetBlockSizeTokens() != 32 || in.GetReportsCacheEvents() {
			return fmt.Sprintf("sidecar sees %v", in)
		}
		return ""
	})
}

// TestReporterFlush: with the periodic report an hour away, Flush sends
// the queued events at once.
func TestReporterFlush(t *testing.T) {
	s := startSidecar(t, "127.0.0.1:0", "", func(c *daemon.Config) { c.Server.ReportInterval = time.Hour })
	cc := dial(t, s.addr)
	r := reporter(t, cc, client.ReporterOptions{Pool: "m", Deployment: "A", InstanceID: "f-1", CacheEvents: true, Interval: time.Hour})
	testwait.EventuallyOK(t, func() string {
		if !r.Stats().Connected {
			return "not connected"
		}
		return ""
	})
	r.Stored(1, 2, 3)
	r.Flush()
	cachedBlocks(t, s, cc, "m", "f-1", 3)
	r.Removed(1)
	r.Flush()
	cachedBlocks(t, s, cc, "m", "f-1", 2)
}

// TestReporterHold: while Hold returns true the Reporter sends nothing, not
// even the first report; once it returns false the reports flow.
func TestReporterHold(t *testing.T) {
	s := startSidecar(t, "127.0.0.1:0", "")
	cc := dial(t, s.addr)
	var held atomic.Bool
	var calls atomic.Int64
	held.Store(true)
	r := reporter(t, cc, client.ReporterOptions{Pool: "m", Deployment: "A", InstanceID: "h-1", Interval: 5 * time.Millisecond,
		Hold: func() bool { calls.Add(1); return held.Load() }})
	testwait.EventuallyOK(t, func() string {
		if calls.Load() < 5 {
			return "Hold not called 5 times yet"
		}
		return ""
	})
	if st := r.Stats(); st.Reports != 0 || instanceStatus(cc, "m", "h-1") != nil {
		t.Fatalf("held Reporter sent %d reports (sidecar sees %v)", st.Reports, instanceStatus(cc, "m", "h-1"))
	}
	held.Store(false)
	testwait.EventuallyOK(t, func() string {
		if instanceStatus(cc, "m", "h-1") == nil {
			return "instance not reported after the hold ended"
		}
		return ""
	})
	held.Store(true)
	n := r.Stats().Reports
	c := calls.Load()
	testwait.EventuallyOK(t, func() string {
		if calls.Load() < c+5 {
			return "Hold not called again"
		}
		return ""
	})
	if got := r.Stats().Reports; got > n+1 {
		t.Fatalf("held again, the Reporter sent %d more reports", got-n)
	}
}

// TestReporterClose: Close ends the stream cleanly, the sidecar marks the
// instance disconnected, and a second Close is harmless.
func TestReporterClose(t *testing.T) {
	s := startSidecar(t, "127.0.0.1:0", "")
	cc := dial(t, s.addr)
	r := reporter(t, cc, client.ReporterOptions{Pool: "m", Deployment: "A", InstanceID: "a-1"})
	cachedBlocks(t, s, cc, "m", "a-1", 0)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	testwait.EventuallyOK(t, func() string {
		if in := instanceStatus(cc, "m", "a-1"); in.GetState() != pb.InstanceState_INSTANCE_STATE_DISCONNECTED {
			return fmt.Sprintf("instance is %v after Close, want disconnected", in.GetState())
		}
		return ""
	})
	if st := r.Stats(); st.LastError != nil || st.Connected {
		t.Errorf("after Close: %+v", st)
	}
	closeReporter(t, r)
}

// TestReporterCloseWhileDown: Close returns while the Reporter is backing
// off from an unreachable sidecar, without waiting the backoff out and
// without another connection attempt. MinBackoff = MaxBackoff = 10s, so
// every wait is drawn from [0, 10s] (full jitter); Close must return before
// MaxBackoff has passed since the failure was seen, which a Close that
// waited for the timer would only do by the luck of a short draw, and then
// it would have opened another stream, which the test also rejects.
func TestReporterCloseWhileDown(t *testing.T) {
	const backoff = 10 * time.Second
	r := reporter(t, dial(t, servertest.DeadAddr(t)), client.ReporterOptions{Pool: "m", Deployment: "A", InstanceID: "a-1",
		MinBackoff: backoff, MaxBackoff: backoff})
	testwait.EventuallyOK(t, func() string {
		if !client.Unreachable(r.Stats().LastError) {
			return fmt.Sprintf("LastError %v, want unreachable", r.Stats().LastError)
		}
		return ""
	})
	failed := time.Now()
	streams := r.Stats().Streams
	if err := r.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if took := time.Since(failed); took >= backoff {
		t.Fatalf("Close returned %v after the failure, not before the %v backoff expired", took, backoff)
	}
	if got := r.Stats().Streams; got > streams+1 {
		t.Fatalf("Close let the Reporter open %d more streams", got-streams)
	}
}

func TestNewReporterOptions(t *testing.T) {
	load := func() client.Load { return client.Load{} }
	for _, tc := range []struct {
		name string
		opts client.ReporterOptions
	}{
		{"no pool", client.ReporterOptions{Deployment: "A", InstanceID: "a", Address: "x:1", Load: load}},
		{"no deployment", client.ReporterOptions{Pool: "m", InstanceID: "a", Address: "x:1", Load: load}},
		{"no instance", client.ReporterOptions{Pool: "m", Deployment: "A", Address: "x:1", Load: load}},
		{"no address", client.ReporterOptions{Pool: "m", Deployment: "A", InstanceID: "a", Load: load}},
		{"no load", client.ReporterOptions{Pool: "m", Deployment: "A", InstanceID: "a", Address: "x:1"}},
		{"negative limit", client.ReporterOptions{Pool: "m", Deployment: "A", InstanceID: "a", Address: "x:1", Load: load,
			MaxEventsPerMessage: -1}},
		{"ack interval over the limit", client.ReporterOptions{Pool: "m", Deployment: "A", InstanceID: "a", Address: "x:1", Load: load,
			AckInterval: client.MaxAckInterval + time.Millisecond}},
	} {
		if _, err := client.NewReporter(nil, tc.opts); err == nil {
			t.Errorf("%s: no error", tc.name)
		}
	}
}
