package server_test

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
)

var (
	buildOnce sync.Once
	daemonBin string
	buildErr  error
)

// buildDaemon builds cmd/prefixrouted once per test binary.
func buildDaemon(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := filepathTemp()
		if err != nil {
			buildErr = err
			return
		}
		daemonBin = filepath.Join(dir, "prefixrouted")
		out, err := exec.Command("go", "build", "-o", daemonBin, "../cmd/prefixrouted").CombinedOutput()
		if err != nil {
			buildErr = &buildError{err, string(out)}
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return daemonBin
}

type buildError struct {
	err error
	out string
}

func (e *buildError) Error() string { return "go build: " + e.err.Error() + "\n" + e.out }

// servingRE finds the gRPC address in the start-up line, text or JSON.
var servingRE = regexp.MustCompile(`prefixrouted serving.*?\bgrpc"?[=:]"?([0-9.]+:[0-9]+)`)

// process is prefixrouted running as a child process.
type process struct {
	cmd  *exec.Cmd
	addr string
}

// startProcess runs the daemon on a free loopback port with dataDir and
// waits until it logs its address.
func startProcess(t *testing.T, dataDir string, extra ...string) *process {
	t.Helper()
	args := append([]string{"--listen", "127.0.0.1:0", "--http-listen", "off", "--data-dir", dataDir}, extra...)
	cmd := exec.Command(buildDaemon(t), args...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &process{cmd: cmd}
	kill := func() {
		if err := cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
			t.Errorf("killing prefixrouted: %v", err)
		}
	}
	t.Cleanup(func() {
		kill()
		_ = cmd.Wait() // "signal: killed", or the exit status the test checked
	})
	// A daemon that never logs its address is killed, which ends the scan.
	timer := time.AfterFunc(time.Minute, kill)
	defer timer.Stop()
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		if m := servingRE.FindStringSubmatch(sc.Text()); m != nil {
			p.addr = m[1]
			break
		}
	}
	if p.addr == "" {
		_ = cmd.Wait() // its exit status is in cmd.ProcessState, reported next
		t.Fatalf("prefixrouted exited before serving: %v", cmd.ProcessState)
	}
	go func() {
		for sc.Scan() {
		}
	}()
	return p
}

func (p *process) admin(t *testing.T) pb.AdminServiceClient {
	conn, err := grpc.NewClient(p.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return pb.NewAdminServiceClient(conn)
}

// TestDurableAcrossKill9: weights and policy acknowledged by SetWeights /
// SetPolicy survive kill -9 of the process, with their versions.
func TestDurableAcrossKill9(t *testing.T) {
	dir := t.TempDir()
	p := startProcess(t, dir)
	c := p.admin(t)
	bg := context.Background()
	for i, w := range []map[string]float64{{"A": 9, "B": 1}, {"A": 1, "B": 9}} {
		r, err := c.SetWeights(bg, &pb.SetWeightsRequest{AllowNewPool: true, Pool: "m", Weights: w, ExpectedVersion: uint64(i)})
		if err != nil {
			t.Fatal(err)
		}
		if r.GetVersion() != uint64(i+1) {
			t.Fatalf("version %d", r.GetVersion())
		}
	}
	if _, err := c.SetPolicy(bg, &pb.SetPolicyRequest{AllowNewPool: true, Pool: "m", Policy: &pb.Policy{DeltaMs: f64(35)}}); err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Wait(); err == nil {
		t.Fatal("expected the process to die of SIGKILL")
	}

	p2 := startProcess(t, dir)
	c2 := p2.admin(t)
	ctx, cancel := context.WithTimeout(bg, 10*time.Second)
	defer cancel()
	got, err := c2.GetWeights(ctx, &pb.GetWeightsRequest{Pool: "m"})
	if err != nil {
		t.Fatal(err)
	}
	if got.GetVersion() != 2 || got.GetWeights()["A"] != 1 || got.GetWeights()["B"] != 9 {
		t.Errorf("after kill -9: version %d weights %v, want 2 and A=1 B=9", got.GetVersion(), got.GetWeights())
	}
	pol, err := c2.GetPolicy(ctx, &pb.GetPolicyRequest{Pool: "m"})
	if err != nil {
		t.Fatal(err)
	}
	if pol.GetPolicy().GetDeltaMs() != 35 || pol.GetVersion() != 1 {
		t.Errorf("after kill -9: policy delta_ms %v version %d", pol.GetPolicy().GetDeltaMs(), pol.GetVersion())
	}
	// CAS continues from the restored version.
	if _, err := c2.SetWeights(ctx, &pb.SetWeightsRequest{AllowNewPool: true, Pool: "m", Weights: map[string]float64{"B": 1}, ExpectedVersion: 2}); err != nil {
		t.Errorf("CAS at the restored version: %v", err)
	}
}

// TestCorruptStateRefusesToStart: a corrupt state file stops the daemon with
// a message naming the file, and the file is left as it was.
func TestCorruptStateRefusesToStart(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.json")
	if err := writeFile(path, "{not json"); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(buildDaemon(t), "--listen", "127.0.0.1:0", "--http-listen", "off", "--data-dir", dir).CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("exit: %v, output %s", err, out)
	}
	if !regexp.MustCompile(regexp.QuoteMeta(path)).Match(out) {
		t.Errorf("message does not name %s: %s", path, out)
	}
	if b, _ := readFile(path); b != "{not json" {
		t.Errorf("state file changed to %q", b)
	}
}
