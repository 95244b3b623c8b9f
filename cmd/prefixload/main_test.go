package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// daemonBin is prefixrouted built once per test binary, on first use, by
// buildDaemon; TestMain removes it.
var daemonBin struct {
	once sync.Once
	dir  string
	path string
	err  error
}

// buildDaemon returns prefixrouted built from this tree (once for every
// test of the binary).
func buildDaemon(t *testing.T) string {
	t.Helper()
	daemonBin.once.Do(func() {
		daemonBin.dir, daemonBin.err = os.MkdirTemp("", "prefixload-test-")
		if daemonBin.err != nil {
			return
		}
		daemonBin.path = filepath.Join(daemonBin.dir, "prefixrouted")
		if out, err := exec.Command("go", "build", "-o", daemonBin.path, "../prefixrouted").CombinedOutput(); err != nil {
			daemonBin.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if daemonBin.err != nil {
		t.Fatal(daemonBin.err)
	}
	return daemonBin.path
}

// TestMain removes the daemon buildDaemon built.
func TestMain(m *testing.M) {
	code := m.Run()
	if daemonBin.dir != "" {
		if err := os.RemoveAll(daemonBin.dir); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}
	os.Exit(code)
}
