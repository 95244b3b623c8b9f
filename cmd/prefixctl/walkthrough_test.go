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
)

// walkthroughDocs are where the walk-through lives, first found first.
var walkthroughDocs = []string{"../../README.md"}

const (
	walkBegin = "<!-- walkthrough:begin -->"
	walkEnd   = "<!-- walkthrough:end -->"
)

// walkthrough returns the walk-through's shell script and the file it came
// from: the one ```sh block between the markers.
func walkthrough(t *testing.T) (script, from string) {
	t.Helper()
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

// TestWalkthrough runs the documented walk-through with bash against a real
// sidecar: prefixctl is built into a temp dir put first on PATH, and the
// script's 127.0.0.1:50051 is rewritten to the sidecar's address.
func TestWalkthrough(t *testing.T) {
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
	script, from := walkthrough(t)
	if !strings.Contains(script, defaultAddr) {
		t.Fatalf("%s: the walk-through never names %s, so it cannot be pointed at a test sidecar", from, defaultAddr)
	}

	bin := t.TempDir()
	build := exec.Command(goTool, "build", "-o", filepath.Join(bin, "prefixctl"), ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	d := startDaemon(t, false)
	script = strings.ReplaceAll(script, defaultAddr, d.Addr())
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
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	if cmd.Process != nil {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	out := stdout.String()
	t.Logf("%s walk-through output:\n%s\nstderr:\n%s", from, out, stderr.String())
	if err != nil {
		t.Fatalf("%s walk-through: %v\nstdout:\n%s\nstderr:\n%s", from, err, out, stderr.String())
	}
	for _, want := range []string{
		"reporting to " + d.Addr(),
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
			t.Errorf("%s walk-through output lacks %q\nstdout:\n%s\nstderr:\n%s", from, want, out, stderr.String())
		}
	}
	if want := "version conflict: expected 1, current 2"; !strings.Contains(stderr.String(), want) {
		t.Errorf("%s walk-through stderr lacks %q:\n%s", from, want, stderr.String())
	}
}
