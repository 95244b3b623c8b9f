package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/prefixroute/prefixroute/internal/natstest"
)

// liveRow and baselineRow match the softmax and round-robin rows of the
// gRPC table with no pick errors and nothing unfinished.
var (
	liveRow     = regexp.MustCompile(`(?m)^\| softmax \| [1-9][0-9]* \| 0 \| .* \| 0 \|$`)
	baselineRow = regexp.MustCompile(`(?m)^\| round-robin \| [1-9][0-9]* \| 0 \| .* \| 0 \|$`)
	// pairsRow is the softmax row of the request-by-request table.
	pairsRow = regexp.MustCompile(`(?m)^\| softmax \| [1-9][0-9]* \| [0-9.]+ % \| [0-9.]+ % \| ([0-9.]+ %|—) \| ([0-9.]+ %|—) \|$`)
)

// TestScenarioCommand plays the smoke scenario for one second against a
// prefixrouted started as a child process: it writes the files prefixsim
// run writes (the CSV series, summary.md, summary.json, tail.csv) plus
// the routes CSV, plays the round-robin baseline in process on the same
// traffic, prints both tables, and with --compare tables the runs against
// their simulations.
func TestScenarioCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	dir := t.TempDir()
	var out, errb bytes.Buffer
	code := scenarioCmd(context.Background(), []string{"--daemon", buildDaemon(t), "--out", dir, "--quiet", "--no-plots",
		"--duration", "1s", "--compare", "smoke"}, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	for _, f := range []string{"softmax.csv", "softmax-routes.csv", "round-robin.csv", "round-robin-routes.csv", "summary.md",
		"summary.json", "tail.csv", "compare.md"} {
		if st, err := os.Stat(filepath.Join(dir, "smoke-live", f)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
	if !strings.Contains(out.String(), "## smoke-live (2 variants") || !liveRow.MatchString(out.String()) ||
		!baselineRow.MatchString(out.String()) || !strings.Contains(out.String(), "| softmax | simulated | ") ||
		!strings.Contains(out.String(), "| softmax | simulated, live delays and draws replayed | ") ||
		!strings.Contains(out.String(), "| round-robin | simulated | ") || !pairsRow.MatchString(out.String()) {
		t.Errorf("summary:\n%s", out.String())
	}
}

// TestScenarioReplicas plays the smoke scenario on two replicas joined
// through a NATS server (--nats): every Pick answered, none unfinished.
func TestScenarioReplicas(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	ns := natstest.Start(t)
	dir := t.TempDir()
	var out, errb bytes.Buffer
	code := scenarioCmd(context.Background(), []string{"--daemon", buildDaemon(t), "--replicas", "2", "--nats", ns.URL(),
		"--out", dir, "--quiet", "--no-plots", "--workers", "4", "--duration", "1s", "smoke"}, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if !liveRow.MatchString(out.String()) {
		t.Errorf("summary:\n%s", out.String())
	}
}

// TestScenarioRefuses: bad flags exit 2 before anything starts; an
// unknown scenario or one with only formula-only variants exits 1.
func TestScenarioRefuses(t *testing.T) {
	norouter := filepath.Join(t.TempDir(), "rr.yaml")
	if err := os.WriteFile(norouter, []byte(`
name: rr
duration: 5s
deployments: [{name: a, instances: 1, prefill_tokens_per_second: 1000, kv_blocks: 100}]
workload: {rate: 1, classes: [{name: c, share: 1}]}
variants: [{name: f, optimistic: false}]
`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string // in stderr
	}{
		{"no scenario", nil, 2, "name at least one scenario"},
		{"off loopback", []string{"--addr", "10.1.2.3:50051", "smoke"}, 2, "only loopback addresses"},
		{"replicas with addr", []string{"--addr", "127.0.0.1:1", "--replicas", "2", "smoke"}, 2, "does not combine with --addr"},
		{"zero speed", []string{"--speed", "0", "smoke"}, 2, "want positive"},
		{"unknown flag", []string{"--live", "smoke"}, 2, "flag provided but not defined: -live"},
		{"unknown scenario", []string{"nosuch"}, 1, "nosuch"},
		{"formula-only", []string{norouter}, 1, "rr: no variant to run live (formula-only variants cannot"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			if code := scenarioCmd(context.Background(), tc.args, &out, &errb); code != tc.code || !strings.Contains(errb.String(), tc.want) {
				t.Errorf("exit %d, want %d and %q: %s", code, tc.code, tc.want, errb.String())
			}
		})
	}
}

// TestVersus: a simulated figure with its difference from the live one,
// marked past 10 %.
func TestVersus(t *testing.T) {
	for _, tc := range []struct {
		sim, live float64
		want      string
	}{
		{11, 10, "11.0 (+10 %)"},
		{8.9, 10, "8.9 (-11 % !)"},
		{13, 10, "13.0 (+30 % !)"},
		{5, 0, "5.0"},
	} {
		if got := versus(tc.sim, tc.live, "%.1f"); got != tc.want {
			t.Errorf("versus(%v, %v) = %q, want %q", tc.sim, tc.live, got, tc.want)
		}
	}
}

// sloYAML is a small scenario whose requests carry a TTFT target, with a
// variant that reports outcomes.
const sloYAML = `
name: slo
seed: 3
duration: 10s
block_tokens: 16
report_interval: 50ms
cache_events: true
deployments: [{name: a, instances: 2, prefill_tokens_per_second: 20000, batch_overhead: 5ms, kv_blocks: 600, max_batch_tokens: 2048}]
workload:
  rate: 40
  ttft_slo_ms: 60000
  classes: [{name: c, share: 1, groups: 20, prefix_tokens: 300, suffix_tokens: 40}]
variants: [{name: learn, outcomes: true}]
`

// TestScenarioPrediction: a live variant with targets and outcomes: true
// prints its outcomes and the router's fit, and --compare tables its
// prediction error and attainment against the simulation's. The target
// (60 s) is beyond the run's deadline, so the live attainment is exactly
// 100 %, as is the simulation's.
func TestScenarioPrediction(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "slo.yaml")
	if err := os.WriteFile(path, []byte(sloYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	code := scenarioCmd(context.Background(), []string{"--daemon", buildDaemon(t), "--out", dir, "--quiet", "--no-plots",
		"--duration", "1s", "--compare", "--print", path}, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	s := out.String()
	for _, re := range []string{
		`(?m)^outcomes of learn: [1-9][0-9]* sent, 0 dropped, 0 failed \(ReportOutcome\); the router's fits:$`,
		`(?m)^- a: version [0-9]+, [0-9]+ accepted, [0-9]+ ignored, `,
		`(?m)^\| learn \| live \| [0-9.]+ % \| [0-9.]+ % \| [0-9.]+ \| 100\.0 % \| 0 \|$`,
		`(?m)^\| learn \| simulated \| .* \| 100\.0 % \(\+0 %\) \| 0 \|$`,
		`(?m)^\| learn \| simulated, live delays and draws replayed \| .* \| 100\.0 % \(\+0 %\) \| 0 \|$`,
	} {
		if !regexp.MustCompile(re).MatchString(s) {
			t.Errorf("no line matching %s in:\n%s", re, s)
		}
	}
}
