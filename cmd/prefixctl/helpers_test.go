package main

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/prefixroute/prefixroute/daemon"
	"github.com/prefixroute/prefixroute/internal/servertest"
	"github.com/prefixroute/prefixroute/pkg/client"
)

// TestMain fails the package's tests if they leave goroutines running.
func TestMain(m *testing.M) { servertest.VerifyNoLeaks(m) }

// startDaemon runs a real sidecar on 127.0.0.1:0 with a temp data dir
// (servertest.Start), stopped at the end of the test. With frozen, its clock
// stands still (no instance ever goes stale); else it is the real clock.
func startDaemon(t *testing.T, frozen bool) *daemon.Daemon {
	t.Helper()
	opts := []servertest.Option{servertest.Config(func(c *daemon.Config) {
		c.HTTPListen = "off"
	})}
	if !frozen {
		opts = append(opts, servertest.RealClock())
	}
	return servertest.Start(t, opts...).D
}

// result is one prefixctl run.
type result struct {
	code           int
	stdout, stderr string
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
}

// ctl runs prefixctl with args against addr.
func ctl(addr string, args ...string) result {
	var out, errb bytes.Buffer
	code := run(append([]string{"--addr", addr}, args...), &out, &errb)
	return result{code, out.String(), errb.String()}
}

// expect fails unless r has the exit code and its stdout (or, for a
// non-zero code, its stderr) contains every part.
func expect(t *testing.T, r result, code int, parts ...string) {
	t.Helper()
	text := r.stdout
	if code != 0 {
		text = r.stderr
	}
	if r.code != code {
		t.Fatalf("want exit %d, got %v", code, r)
	}
	for _, p := range parts {
		if !strings.Contains(text, p) {
			t.Errorf("output lacks %q:\n%v", p, r)
		}
	}
	// The error is one line (instance run may log warnings before it).
	if code != 0 && strings.Count(r.stderr, "prefixctl: ") != 1 {
		t.Errorf("want one error line: %q", r.stderr)
	}
}

// fromJSON parses protojson output into m.
func fromJSON(t *testing.T, r result, m proto.Message) {
	t.Helper()
	if r.code != 0 {
		t.Fatalf("want success, got %v", r)
	}
	if err := protojson.Unmarshal([]byte(r.stdout), m); err != nil {
		t.Fatalf("output is not protojson of %T: %v\n%s", m, err, r.stdout)
	}
}

// silentAddr is a TCP listener that accepts connections and never speaks.
func silentAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
		}
	}()
	return l.Addr().String()
}

// deadAddr is a loopback address nothing listens on.
func deadAddr(t *testing.T) string { return servertest.DeadAddr(t) }

// report starts an instance through pkg/client, closed at the end of the
// test.
func report(t *testing.T, addr string, opts client.ReporterOptions, load client.Load) {
	t.Helper()
	cc, err := client.Dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	opts.Load = func() client.Load { return load }
	opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	opts.MinBackoff, opts.MaxBackoff = 5*time.Millisecond, 50*time.Millisecond
	r, err := client.NewReporter(cc, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := r.Close(); err != nil {
			t.Errorf("Reporter.Close: %v", err)
		}
		cc.Close()
	})
}
