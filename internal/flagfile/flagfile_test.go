package flagfile

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// testFlags is a flag set like prefixrouted's: strings, numbers, a
// duration, a bool, and the command-line-only config flag.
func testFlags() (*flag.FlagSet, *string, *int, *time.Duration, *bool) {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:50051", "")
	n := fs.Int("max-pools", 1024, "")
	d := fs.Duration("migration-window", 5*time.Minute, "")
	b := fs.Bool("insecure", false, "")
	fs.String("config", "", "")
	return fs, listen, n, d, b
}

func write(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "prefixrouted.yaml")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestApply(t *testing.T) {
	for _, tc := range []struct {
		name, file string
		args       []string
		listen     string
		pools      int
		window     time.Duration
		insecure   bool
		err        string // part of the error, "" for none
	}{
		{"every kind", "listen: 0.0.0.0:50051\nmax-pools: 10\nmigration-window: 90s\ninsecure: true\n", nil,
			"0.0.0.0:50051", 10, 90 * time.Second, true, ""},
		{"command line wins", "listen: 0.0.0.0:50051\nmax-pools: 10\n", []string{"-max-pools", "20"},
			"0.0.0.0:50051", 20, 5 * time.Minute, false, ""},
		{"quoted", "listen: \"[::1]:50051\"\n", nil, "[::1]:50051", 1024, 5 * time.Minute, false, ""},
		{"empty file", "", nil, "127.0.0.1:50051", 1024, 5 * time.Minute, false, ""},
		{"only comments", "# nothing\n", nil, "127.0.0.1:50051", 1024, 5 * time.Minute, false, ""},
		{"unknown key", "listen: x\nlisten-addr: y\n", nil, "127.0.0.1:50051", 1024, 5 * time.Minute, false,
			`:2: unknown key "listen-addr"`},
		{"underscore", "max_pools: 3\n", nil, "", 0, 0, false, `unknown key "max_pools" (did you mean "max-pools"?)`},
		{"dashes", "--insecure: true\n", nil, "", 0, 0, false, `(did you mean "insecure"?)`},
		{"config in the file", "config: other.yaml\n", nil, "", 0, 0, false, `:1: key "config": only on the command line`},
		{"twice", "max-pools: 1\nmax-pools: 2\n", nil, "", 0, 0, false, `:2: key "max-pools" given twice (first on line 1)`},
		{"list", "listen:\n  - a\n  - b\n", nil, "", 0, 0, false, ":2: listen: want one value"},
		{"null", "listen:\n", nil, "", 0, 0, false, ":1: listen: no value"},
		{"bad value", "max-pools: many\n", nil, "", 0, 0, false, `:1: max-pools: parse error`},
		{"bad duration", "migration-window: 5\n", nil, "", 0, 0, false, `:1: migration-window: parse error`},
		{"not a mapping", "- listen\n", nil, "", 0, 0, false, ":1: want a mapping of flag names to values"},
		{"not YAML", "listen: [\n", nil, "", 0, 0, false, "not YAML"},
		{"two documents", "listen: a\n---\nlisten: b\n", nil, "", 0, 0, false, "more than one YAML document"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs, listen, pools, window, insecure := testFlags()
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			err := Apply(fs, write(t, tc.file), "config")
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if *listen != tc.listen || *pools != tc.pools || *window != tc.window || *insecure != tc.insecure {
				t.Fatalf("got %q %d %v %v", *listen, *pools, *window, *insecure)
			}
		})
	}
}

func TestApplyLimits(t *testing.T) {
	fs, _, _, _, _ := testFlags()
	if err := Apply(fs, filepath.Join(t.TempDir(), "missing.yaml")); err == nil || !os.IsNotExist(err) {
		t.Fatalf("missing file: %v", err)
	}
	at := "# " + strings.Repeat("x", MaxBytes-3) + "\n" // exactly MaxBytes
	if err := Apply(fs, write(t, at)); err != nil {
		t.Fatalf("a file of MaxBytes: %v", err)
	}
	if err := Apply(fs, write(t, at+"#")); err == nil || !strings.Contains(err.Error(), "larger than 1048576 bytes") {
		t.Fatalf("a file over MaxBytes: %v", err)
	}
}
