//go:build unix

package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prefixroute/prefixroute/pkg/client"
)

// walkthroughDocs are where the walk-throughs live, first found first: the
// README's quick one and docs/cutovers.md's rollout.
var walkthroughDocs = []string{"../../README.md", "../../docs/cutovers.md"}

// walkthrough returns a documented script and the file it came from: the
// one ```sh block between <!-- NAME:begin --> and <!-- NAME:end -->.
func walkthrough(t *testing.T, name string) (script, from string) {
	t.Helper()
	walkBegin, walkEnd := "<!-- "+name+":begin -->", "<!-- "+name+":end -->"
	for _, path := range walkthroughDocs {
		b, err := os.ReadFile(path)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		doc := string(b)
		_, rest, ok := strings.Cut(doc, walkBegin)
		if !ok {
			continue
		}
		section, _, ok := strings.Cut(rest, walkEnd)
		if !ok {
			t.Fatalf("%s: %s without %s", path, walkBegin, walkEnd)
		}
		_, block, ok := strings.Cut(section, "```sh\n")
		if !ok {
			t.Fatalf("%s: no ```sh block between the walk-through markers", path)
		}
		block, _, ok = strings.Cut(block, "\n```")
		if !ok {
			t.Fatalf("%s: the walk-through's ```sh block is not closed", path)
		}
		return block + "\n", path
	}
	t.Fatalf("no walk-through (%s ... %s) in any of %v", walkBegin, walkEnd, walkthroughDocs)
	return "", ""
}

// TestWalkthrough runs the README's walk-through with bash against a real
// sidecar.
func TestWalkthrough(t *testing.T) {
	out, stderr, addr, from := runScript(t, "walkthrough")
	for _, want := range []string{
		"reporting to " + addr,
		"pool m: 2 instances, 2 ok",
		"pool m: weights set, version 1",
		"picked a-1 (deployment A) at 10.0.0.1:8000", // the hot prefix stays on A
		"deployment A, P(d) 99.1%",                   // the audit table
		"* a-1",                                      // the chosen row
		"P(i|d)",                                     // the instance table's header
		"picked b-1 (deployment B) at 10.0.0.2:8000", // a cold prefix follows the weights
		"pool m: weights set, version 2",             // the first compare-and-set wins
		"exit code 4",                                // the second loses
	} {
		if !strings.Contains(out, want) {
			t.Errorf("%s walk-through output lacks %q\nstdout:\n%s\nstderr:\n%s", from, want, out, stderr)
		}
	}
	if want := "version conflict: expected 1, current 2"; !strings.Contains(stderr, want) {
		t.Errorf("%s walk-through stderr lacks %q:\n%s", from, want, stderr)
	}
}

// TestRolloutWalkthrough runs docs/cutovers.md's "Rolling out a new deployment"
// with bash against a real sidecar on the real clock.
func TestRolloutWalkthrough(t *testing.T) {
	out, stderr, _, from := runScript(t, "rollout")
	for _, want := range []string{
		"pool chat: 4 instances, 4 ok",
		"pool chat: A -> B",
		"cached deeper on A than on B: 100% of requests",
		"verdict: B can absorb A's traffic",
		"hot prefixes cached only on A",
		"ramp 1 running: step 0 of 4 applied",
		"ramp 1 done: step 4 of 4 applied",
		"B                1   100%", // weights get after the ramp
	} {
		if !strings.Contains(out, want) {
			t.Errorf("%s rollout output lacks %q\nstdout:\n%s\nstderr:\n%s", from, want, out, stderr)
		}
	}
}

// runScript runs the documented script NAME with bash against a real
// sidecar: prefixctl is built into a temp dir put first on PATH, and the
// script's 127.0.0.1:50051 is rewritten to the sidecar's address. It
// returns the script's stdout and stderr, the sidecar's address and the
// document the script came from.
func runScript(t *testing.T, name string) (stdout, stderr, addr, from string) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds prefixctl and runs a shell script")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool on PATH to build prefixctl with")
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash on PATH")
	}
	script, from := walkthrough(t, name)
	if !strings.Contains(script, client.DefaultAddr) {
		t.Fatalf("%s: the walk-through never names %s, so it cannot be pointed at a test sidecar", from, client.DefaultAddr)
	}

	bin := t.TempDir()
	build := exec.Command(goTool, "build", "-o", filepath.Join(bin, "prefixctl"), ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	d := startDaemon(t, false)
	script = strings.ReplaceAll(script, client.DefaultAddr, d.Addr())
	path := filepath.Join(t.TempDir(), "walkthrough.sh")
	if err := os.WriteFile(path, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bash, path)
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"), "PREFIXCTL_ADDR=")
	// Its own process group, so that the background instances die with it
	// whatever happens.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var outb, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &outb, &errb
	err = cmd.Run()
	if cmd.Process != nil {
		// Reap the process group; ESRCH (already gone) is the usual answer.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	stdout, stderr = outb.String(), errb.String()
	t.Logf("%s %s output:\n%s\nstderr:\n%s", from, name, stdout, stderr)
	if err != nil {
		t.Fatalf("%s %s: %v\nstdout:\n%s\nstderr:\n%s", from, name, err, stdout, stderr)
	}
	return stdout, stderr, d.Addr(), from
}
