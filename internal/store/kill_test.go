package store

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"syscall"
	"testing"
)

// killChildEnv names the data dir of the child process of
// TestDurableAcrossKill9. When it is set, the test binary is that child.
const killChildEnv = "STORE_KILL9_CHILD_DIR"

var killWeights = map[string]float64{"a": 1, "b": 9}

func TestMain(m *testing.M) {
	if dir := os.Getenv(killChildEnv); dir != "" {
		killChild(dir)
	}
	os.Exit(m.Run())
}

// killChild sets weights in dir, then kills itself with SIGKILL the moment
// SetWeights returns: no deferred function, no Close, no exit handler runs.
func killChild(dir string) {
	s, err := Open(dir, Options{})
	if err == nil {
		_, err = s.SetWeights("chat", killWeights, 1, "child")
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		os.Exit(2)
	}
	// The process ends here either way; there is no one to report to.
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {} // never reached
}

func TestDurableAcrossKill9(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, Options{})
	if _, err := s.SetWeights("chat", map[string]float64{"a": 1}, 0, "parent"); err != nil {
		t.Fatal(err)
	}
	closeStore(t, s)

	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), killChildEnv+"="+dir)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("child: %v; want killed by SIGKILL\n%s", err, out)
	}
	if ws, ok := ee.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("child: %v; want killed by SIGKILL\n%s", err, out)
	}

	s = openStore(t, dir, Options{}) // the kernel released the dead child's lock
	c, ok := s.Pool("chat")
	if !ok || c.WeightsVersion != 2 || !maps.Equal(c.Weights, killWeights) {
		t.Fatalf("after kill -9: chat = %+v, %v; want weights %v version 2", c, ok, killWeights)
	}
	if lines := auditLines(t, s); len(lines) != 2 || lines[1]["caller"] != "child" {
		t.Errorf("audit log after kill -9: %v; want the child's record last", lines)
	}
}
