package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
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

func TestRunLiveInProcess(t *testing.T) {
	dir := t.TempDir()
	var out, errb bytes.Buffer
	code := run([]string{"run", "--live", "--out", dir, "--quiet", "--no-plots", "--duration", "1s", "smoke"}, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if !strings.Contains(out.String(), "| softmax |") || !strings.Contains(out.String(), "pick errors") {
		t.Fatalf("live summary:\n%s", out.String())
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
	for _, args := range [][]string{{}, {"bogus"}, {"run"}, {"run", "nosuch"}, {"run", "--live", "--addr", "10.1.2.3:50051", "smoke"}} {
		if code := run(args, &out, &errb); code == 0 {
			t.Errorf("%v: exit 0", args)
		}
	}
}
