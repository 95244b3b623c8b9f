package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prefixroute/prefixroute/internal/buildinfo"
)

func TestRunWritesReport(t *testing.T) {
	dir := t.TempDir()
	var out, errb bytes.Buffer
	code := run([]string{"run", "--out", dir, "--quiet", "--duration", "12s", "smoke"}, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	for _, f := range []string{"softmax.csv", "round-robin.csv", "summary.md", "summary.json", "smoke-ttft-p99.png",
		"smoke-hit-ratio.png", "smoke-share.png", "smoke-prefilled.png"} {
		st, err := os.Stat(filepath.Join(dir, "smoke", f))
		if err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
	if !strings.Contains(out.String(), "| round-robin (baseline) |") {
		t.Errorf("summary not printed:\n%s", out.String())
	}
	csv, _ := os.ReadFile(filepath.Join(dir, "smoke", "softmax.csv"))
	if lines := strings.Count(string(csv), "\n"); lines != 13 { // header + 12 s
		t.Errorf("softmax.csv has %d lines, want 13", lines)
	}
}

func TestTraceAndList(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"trace", "smoke"}, &out, &errb); code != 0 {
		t.Fatalf("trace: exit %d: %s", code, errb.String())
	}
	if n := strings.Count(out.String(), "\n"); n < 500 || !strings.HasPrefix(out.String(), `{"t_ms":`) {
		t.Fatalf("trace wrote %d lines: %.80s", n, out.String())
	}
	out.Reset()
	if code := run([]string{"list"}, &out, &errb); code != 0 || !strings.Contains(out.String(), "cutover\n") {
		t.Fatalf("list: %d %q", code, out.String())
	}
	out.Reset()
	if code := run([]string{"--version"}, &out, &errb); code != 0 || out.String() != "prefixsim "+buildinfo.Read().String()+"\n" {
		t.Fatalf("--version: %d %q", code, out.String())
	}
	for _, args := range [][]string{{}, {"bogus"}, {"run"}, {"run", "nosuch"}, {"run", "--live", "smoke"}} {
		if code := run(args, &out, &errb); code == 0 {
			t.Errorf("%v: exit 0", args)
		}
	}
}

// TestRunReadiness: a scenario with a ramp and a readiness probe writes
// readiness.csv and the readiness plot, and prints the estimate-vs-actual
// table.
func TestRunReadiness(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "ramp.yaml")
	if err := os.WriteFile(path, []byte(`
name: ramp
seed: 3
duration: 30s
block_tokens: 16
cache_events: true
deployments:
  - {name: a, instances: 2, prefill_tokens_per_second: 20000, batch_overhead: 5ms, kv_blocks: 2000}
  - {name: b, instances: 2, prefill_tokens_per_second: 20000, batch_overhead: 5ms, kv_blocks: 2000}
weights: [{at: 0s, weights: {a: 1, b: 0}}]
ramp: {at: 5s, target: {a: 0, b: 1}, duration: 15s, interval: 5s}
readiness: {at: 19s, from: a, to: b, window: 8s}
workload:
  rate: 30
  classes:
    - {name: shared, share: 0.5, groups: 20, zipf: 1.0, prefix_tokens: 256, suffix_tokens: 40}
    - {name: chat, share: 0.5, kind: conversation, conversations: 10, prefix_tokens: 128, suffix_tokens: 40, user_tokens: 24, output_tokens: 16, turns: 4}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := run([]string{"run", "--out", dir, "--quiet", path}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	for _, f := range []string{"readiness.csv", "ramp-readiness.png"} {
		if st, err := os.Stat(filepath.Join(dir, "ramp", f)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
	csv, _ := os.ReadFile(filepath.Join(dir, "ramp", "readiness.csv"))
	if lines := strings.Split(strings.TrimSpace(string(csv)), "\n"); len(lines) != 2 || !strings.HasPrefix(lines[1], "default,a,b,19.0000,20.0000,8.0000,") {
		t.Errorf("readiness.csv:\n%s", csv)
	}
	if !strings.Contains(out.String(), "Readiness probe: router 0's migration estimate a → b") || !strings.Contains(out.String(), "| default | 19s → 20s |") {
		t.Errorf("summary:\n%s", out.String())
	}
}
