package simout

import (
	"github.com/prefixroute/prefixroute/internal/sim"

	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"gonum.org/v1/plot"
)

// TestWritePlotsRefusesEmpty: a run with one plotting window (10 s plotted
// in 10 s windows, as 'make sim-smoke' once did) is an error naming the
// plot, not a blank PNG; the smoke scenario as 'make sim-smoke' runs it
// writes every plot.
func TestWritePlotsRefusesEmpty(t *testing.T) {
	sc, err := sim.LoadScenario("smoke")
	if err != nil {
		t.Fatal(err)
	}
	short := *sc
	short.Duration, short.Smooth = sim.Duration(10*time.Second), sim.Duration(10*time.Second)
	runs := runAll(t, &short)
	if _, err := WritePlots(t.TempDir(), &short, runs); !errors.Is(err, ErrEmptyPlot) {
		t.Fatalf("10 s in 10 s windows: %v, want ErrEmptyPlot", err)
	}
	dir := t.TempDir()
	paths, err := WritePlots(dir, sc, runAll(t, sc))
	if err != nil {
		t.Fatalf("smoke: %v", err)
	}
	for _, p := range paths {
		if st, err := os.Stat(p); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", filepath.Base(p), err)
		}
	}
}

// TestLogTicks: a log axis within one decade gets at least two labels.
func TestLogTicks(t *testing.T) {
	for _, r := range [][2]float64{{12, 80}, {30, 45}, {1, 1000}, {0.5, 3}} {
		labels := 0
		for _, tk := range (logTicks{}).Ticks(r[0], r[1]) {
			if tk.Label != "" {
				labels++
			}
			if tk.Value < r[0] || tk.Value > r[1] {
				t.Errorf("%v: tick %v outside the range", r, tk.Value)
			}
		}
		if labels < 2 {
			t.Errorf("%v: %d labels, want at least 2", r, labels)
		}
	}
	var _ plot.Ticker = logTicks{}
}

// runAll runs every variant of sc.
func runAll(t *testing.T, sc *sim.Scenario) []*sim.Result {
	t.Helper()
	var out []*sim.Result
	for _, v := range sc.Variants {
		out = append(out, run(t, sc, v.Name))
	}
	return out
}

// run runs one variant, failing the test on error.
func run(t *testing.T, sc *sim.Scenario, variant string) *sim.Result {
	t.Helper()
	res, err := sim.Run(sc, variant, sim.RunOptions{})
	if err != nil {
		t.Fatalf("Run %s/%s: %v", sc.Name, variant, err)
	}
	return res
}
