package sim

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestParsePDScenarioErrors: every bad pd section fails with a message
// that names what was wrong.
func TestParsePDScenarioErrors(t *testing.T) {
	base := strings.NewReplacer("DECIDER", "router", "SLOTS", "4").Replace(pdTinyYAML)
	cases := []struct{ name, from, to, want string }{
		{"too many roles", "prefill: {main: 1}", "prefill: {main: 2}", `deployment "main": 2 prefill + 1 decode instances, but it has 2`},
		{"unknown deployment", "prefill: {main: 1}", "prefill: {other: 1}", `deployment "other": no such deployment`},
		{"negative count", "decode: {main: 1}", "decode: {main: -1}", `deployment "main": -1 instances: want ≥ 0`},
		{"unknown decider", "deciders: {v: router}", "deciders: {v: sometimes}", `variant "v": decider "sometimes"`},
		{"unknown variant", "deciders: {v: router}", "deciders: {w: router}", `deciders: no variant "w"`},
		{"transfer", "transfer_ms_per_token: 0.01", "transfer_ms_per_token: -1", "transfer_ms_per_token -1: want 0–1000 ms"},
		{"slots", "decode_slots: 4", "decode_slots: -2", "decode_slots -2: want 1–100000"},
		{"interference", "decode_interference: 1", "decode_interference: 11", "decode_interference 11: want 0–10"},
		{"decode step", "decode_interference: 1", "decode_interference: 1\n  decode_ms_per_running: 1001", "decode_ms_per_running 1001: want 0–1000 ms"},
		{"decode step negative", "decode_interference: 1", "decode_interference: 1\n  decode_ms_per_running: -0.1", "decode_ms_per_running -0.1: want 0–1000 ms"},
		{"decode throughput", "decode_prefill_tokens_per_second: 5000", "decode_prefill_tokens_per_second: -5", "decode_prefill_tokens_per_second -5"},
		{"baseline picker", "variants: [{name: v}]", "variants: [{name: v, picker: random}]", `picker "random": a pd scenario needs the router`},
		{"unknown field", "decode_slots: 4", "decode_slot: 4", "field decode_slot not found"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			y := strings.Replace(base, c.from, c.to, 1)
			if y == base {
				t.Fatalf("%q not in the scenario", c.from)
			}
			_, err := ParsePDScenario([]byte(y))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one containing %q", err, c.want)
			}
		})
	}
	sc, err := ParsePDScenario([]byte(strings.Replace(base, "  decode_slots: 4\n  decode_interference: 1\n", "", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if sc.PD.DecodeSlots != 64 || *sc.PD.DecodeInterference != 1 {
		t.Errorf("defaults: slots %d, interference %g; want 64, 1", sc.PD.DecodeSlots, *sc.PD.DecodeInterference)
	}
}

// TestPDScenarioFilesLoad: every committed PD scenario (testdata/pd-*.yaml)
// parses and validates, each variant's policy included, and serves requests
// after the warm-up in 40 s of its router variant (seed 1).
func TestPDScenarioFilesLoad(t *testing.T) {
	files, err := filepath.Glob("testdata/pd-*.yaml")
	if err != nil || len(files) < 3 {
		t.Fatalf("testdata/pd-*.yaml: %v, %d files; want at least pd-mixed, pd-mixed-busy, pd-mooncake", err, len(files))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			sc, err := LoadPDScenario(f)
			if err != nil {
				t.Fatal(err)
			}
			r, err := RunPD(sc, "ours", RunOptions{Seed: 1, Duration: 40 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			if len(r.Records) == 0 {
				t.Fatalf("%s: no request served after the warm-up in 40 s", f)
			}
		})
	}
}
