package agent

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/daemon"
	"github.com/prefixroute/prefixroute/internal/servertest"
	"github.com/prefixroute/prefixroute/pkg/client"
)

// debianPython is the interpreter with Debian's python3-zmq and
// python3-msgpack (make test-deps installs them).
const debianPython = "/usr/bin/python3"

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// needStandIn skips, loudly, only when the stand-in's modules cannot be
// imported.
func needStandIn(t *testing.T) {
	t.Helper()
	if out, err := exec.Command(debianPython, "-c", "import zmq, msgpack").CombinedOutput(); err != nil {
		t.Skipf("SKIPPING the engine stand-in tests: %s cannot import zmq and msgpack (%v: %s); run 'make test-deps' "+
			"(apt-get install python3-zmq python3-msgpack)", debianPython, err, strings.TrimSpace(string(out)))
	}
}

// engine is a running testdata/engine.py.
type engine struct {
	t                             *testing.T
	cmd                           *exec.Cmd
	in                            io.WriteCloser
	out                           *bufio.Scanner
	metricsPort, pubPort, replayP int
}

func startEngine(t *testing.T, args ...string) *engine {
	t.Helper()
	cmd := exec.Command(debianPython, append([]string{"testdata/engine.py"}, args...)...)
	in, _ := cmd.StdinPipe()
	outPipe, _ := cmd.StdoutPipe()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	e := &engine{t: t, cmd: cmd, in: in, out: bufio.NewScanner(outPipe)}
	t.Cleanup(e.kill)
	if !e.out.Scan() {
		t.Fatalf("engine stand-in did not start: %s", stderr.String())
	}
	if _, err := fmt.Sscanf(e.out.Text(), "ready %d %d %d", &e.metricsPort, &e.pubPort, &e.replayP); err != nil {
		t.Fatalf("engine stand-in said %q: %v", e.out.Text(), err)
	}
	return e
}

// send runs one command and returns the stand-in's answer.
func (e *engine) send(cmd map[string]any) string {
	e.t.Helper()
	b, _ := json.Marshal(cmd)
	if _, err := fmt.Fprintf(e.in, "%s\n", b); err != nil {
		e.t.Fatal(err)
	}
	if !e.out.Scan() {
		e.t.Fatalf("engine stand-in ended after %s", b)
	}
	return e.out.Text()
}

func (e *engine) kill() {
	if e.cmd.Process != nil {
		if err := e.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
			e.t.Errorf("killing the engine stand-in: %v", err)
		}
		_ = e.cmd.Wait() // "signal: killed", or its exit status if it ended first

	}
}

// freePort returns a loopback port nothing listens on.
func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// TestMain fails the package's tests if they leave goroutines running.
func TestMain(m *testing.M) { servertest.VerifyNoLeaks(m) }

// startRouter runs a real prefixrouted in-process on loopback
// (servertest.Start), with a real clock (instances go stale after the
// default 2s).
func startRouter(t testing.TB) string {
	t.Helper()
	return servertest.Start(t, servertest.RealClock(),
		servertest.Config(func(c *daemon.Config) { c.HTTPListen = "off" })).Addr()
}

const pool, blockSize = "llama", 16

// prompt returns n blocks of distinct tokens starting at from.
func prompt(from, blocks int) []any {
	out := make([]any, blocks*blockSize)
	for i := range out {
		out[i] = from + i
	}
	return out
}

func tokens32(v []any) []uint32 {
	out := make([]uint32, len(v))
	for i, x := range v {
		out[i] = uint32(x.(int))
	}
	return out
}

// matched returns the blocks the router matches on instance id for tokens.
func matched(t *testing.T, p *client.Picker, id string, toks []uint32) uint32 {
	t.Helper()
	res, err := p.Pick(context.Background(), client.Request{Tokens: toks})
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range res.Response.GetDecision().GetInstances() {
		if in.GetInstanceId() == id {
			return in.GetMatchedBlocks()
		}
	}
	return 0
}

func instance(cc *client.Picker, admin pb.AdminServiceClient, id string) *pb.InstanceStatus {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	resp, err := admin.ListInstances(ctx, &pb.ListInstancesRequest{Pool: pool})
	if err != nil {
		return nil
	}
	for _, in := range resp.GetInstances() {
		if in.GetInstanceId() == id {
			return in
		}
	}
	return nil
}
