//go:build unix

package main

import (
	"bytes"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prefixroute/prefixroute/internal/buildinfo"
)

// TestVersionAndConfig runs the real binary: --version, a --config file
// whose values the command line overrides, and a file with an unknown key.
func TestVersionAndConfig(t *testing.T) {
	bin, dir := buildDaemon(t)
	run := func(args ...string) (string, string, int) {
		var out, errb bytes.Buffer
		cmd := exec.Command(bin, args...)
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatal(err)
		}
		return out.String(), errb.String(), cmd.ProcessState.ExitCode()
	}

	t.Run("version", func(t *testing.T) {
		out, _, code := run("--version")
		// The test binary and prefixrouted share the toolchain, not the
		// module version (go test builds have none): compare the Go part.
		if code != 0 || !strings.HasPrefix(out, "prefixrouted ") || !strings.Contains(out, buildinfo.Read().GoVersion+")") {
			t.Fatalf("--version: exit %d, %q", code, out)
		}
	})

	t.Run("config", func(t *testing.T) {
		data := filepath.Join(dir, "from-file")
		cfg := filepath.Join(dir, "prefixrouted.yaml")
		if err := os.WriteFile(cfg, []byte("# prefixrouted --config\nlisten: 127.0.0.1:0\nhttp-listen: 127.0.0.1:0\n"+
			"data-dir: "+data+"\nlog-format: text\nmigration-window: 2m\nshutdown-timeout: 10s\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		// --log-format json on the command line wins over the file's text:
		// startDaemonWith reads the JSON start-up line.
		p := startDaemonWith(t, bin, "--config", cfg, "--log-format", "json")
		if _, err := os.Stat(data); err != nil {
			t.Fatalf("the file's data-dir was not used: %v", err)
		}
		resp, err := http.Get("http://" + p.http + "/healthz")
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("/healthz on the file's http-listen: %v %v", resp, err)
		}
		resp.Body.Close()
	})

	for _, tc := range []struct{ name, file, want string }{
		{"unknown key", "listen: 127.0.0.1:0\nlisten_addr: x\n", `prefixrouted.yaml:2: unknown key "listen_addr"`},
		{"bad value", "max-pools: lots\n", `:1: max-pools: parse error`},
		{"version in the file", "version: true\n", `key "version": only on the command line`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := filepath.Join(t.TempDir(), "prefixrouted.yaml")
			if err := os.WriteFile(cfg, []byte(tc.file), 0o600); err != nil {
				t.Fatal(err)
			}
			_, errOut, code := run("--config", cfg)
			if code != 2 || !strings.Contains(errOut, "prefixrouted: --config: ") || !strings.Contains(errOut, tc.want) {
				t.Fatalf("exit %d, stderr %q; want exit 2 and %q", code, errOut, tc.want)
			}
		})
	}
	t.Run("missing file", func(t *testing.T) {
		if _, errOut, code := run("--config", filepath.Join(dir, "nope.yaml")); code != 2 || !strings.Contains(errOut, "no such file") {
			t.Fatalf("exit %d, %q", code, errOut)
		}
	})
}
