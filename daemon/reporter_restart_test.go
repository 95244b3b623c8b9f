package daemon

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/prefixroute/prefixroute/internal/testwait"
	"github.com/prefixroute/prefixroute/pkg/client"
	"github.com/prefixroute/prefixroute/server"
)

// TestReporterBackAfterRestart: a pkg/client Reporter whose daemon is shut
// down and started again on the same address and data dir reports again,
// and says when and after how many attempts. With a backoff of an hour, it
// can only be back through the connection coming back (the wait ends when
// the connection is ready again): one attempt. With the default backoff,
// the test logs how long the reconnect took.
func TestReporterBackAfterRestart(t *testing.T) {
	for _, tc := range []struct {
		name         string
		backoff      time.Duration // Min and MaxBackoff; 0: the defaults
		wantAttempts int           // 0: any
	}{
		{"backoff of an hour: woken by the connection", time.Hour, 1},
		{"default backoff", 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr, dir := freeLoopbackAddr(t), t.TempDir()
			cfg := Config{Listen: addr, HTTPListen: "off", Server: server.Options{DataDir: dir,
				Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}}
			d, err := Start(cfg)
			must(t, err)
			cc, err := client.Dial(addr)
			must(t, err)
			defer cc.Close()
			rep, err := client.NewReporter(cc, client.ReporterOptions{Pool: "chat", Deployment: "d", InstanceID: "i-1", Address: "10.0.0.1:8000",
				Load:       func() client.Load { return client.Load{PrefillTokensPerSecond: 5000} },
				MinBackoff: tc.backoff, MaxBackoff: tc.backoff, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			must(t, err)
			defer func() { must(t, rep.Close()) }()
			testwait.Eventually(t, "the reporter connected", func() bool { return rep.Stats().Connected })

			must(t, d.Shutdown(context.Background()))
			if d, err = Start(cfg); err != nil {
				t.Fatalf("restart on %s: %v", addr, err)
			}
			defer func() { must(t, d.Shutdown(context.Background())) }()
			started := time.Now()
			testwait.Eventually(t, "the reporter reconnected", func() bool {
				s := rep.Stats()
				return s.Connected && s.Reconnects == 1
			})
			back := time.Since(started)
			rs := rep.Stats().LastReconnect
			t.Logf("back %v after the new daemon started; %v after the stream failed, %d attempts", back, rs.After, rs.Attempts)
			if rs.Attempts < 1 || (tc.wantAttempts > 0 && rs.Attempts != tc.wantAttempts) {
				t.Errorf("reconnected after %d attempts; want %d", rs.Attempts, tc.wantAttempts)
			}
			if rs.After <= 0 {
				t.Errorf("LastReconnect.After = %v; want > 0", rs.After)
			}
		})
	}
}
