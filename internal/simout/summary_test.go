package simout

import (
	"github.com/prefixroute/prefixroute/internal/sim"

	"bytes"
	"math"
	"strings"
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	v := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	for _, tc := range []struct{ p, want float64 }{{0.5, 5}, {0.99, 10}, {0.1, 1}, {0.11, 2}, {1, 10}} {
		if got := sim.Percentile(v, tc.p); got != tc.want {
			t.Errorf("p%v = %v, want %v", tc.p, got, tc.want)
		}
	}
	if sim.Percentile(nil, 0.5) != 0 {
		t.Error("percentile of nothing")
	}
}

// TestDip: a hand-made run whose hit ratio is 0.8, falls to 0.2 for 5 s
// after a weight change at 50 s, climbs to 0.6 for 5 s, then is back.
func TestDip(t *testing.T) {
	res := &sim.Result{Variant: sim.Variant{Name: "v"}, Deployments: []string{"a", "b"}, Focus: "b",
		Instances: []sim.InstanceStats{{ID: "a-00"}, {ID: "b-00"}}, Duration: 100 * time.Second, Smooth: time.Second,
		Changes: []sim.WeightChange{{At: 0, Weights: map[string]float64{"a": 1}}, {At: 50 * time.Second, Weights: map[string]float64{"a": 1, "b": 1}}}}
	for s := range 100 {
		hit, ttft, inst := uint32(80), 10*time.Millisecond, int32(0)
		switch {
		case s >= 50 && s < 55:
			hit, ttft = 20, 100*time.Millisecond
		case s >= 55 && s < 60:
			hit = 60
		}
		if s >= 50 && s%2 == 1 {
			inst = 1
		}
		res.Records = append(res.Records, sim.Record{ID: uint64(s), Arrival: time.Duration(s)*time.Second + 1, TTFT: ttft,
			Prompt: 100, Hit: hit, Instance: inst, Deployment: int16(inst)})
	}
	s := Summarise(res)
	if len(s.Dips) != 1 {
		t.Fatalf("%d dips", len(s.Dips))
	}
	d := s.Dips[0]
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
	if !near(d.Baseline, 0.8) || !near(d.Min, 0.2) || !near(d.Depth, 0.6) || d.MinAfter != 0 ||
		d.HalfWidth != 5*time.Second || d.Recovery != 10*time.Second || d.PeakTTFTP99 != 100 || !near(d.PeakPrefillRatio, 4) {
		t.Fatalf("dip %+v", d)
	}
	if s.Requests != 100 || s.TTFTMax != 100 || s.MaxInstance != "a-00" || !near(s.MaxInstanceShare, 0.75) {
		t.Fatalf("summary %+v", s)
	}
	var buf bytes.Buffer
	sc := &sim.Scenario{Name: "x", Deployments: []sim.DeploymentSpec{{Name: "a"}, {Name: "b"}}, Focus: "b", Smooth: sim.Duration(time.Second)}
	if err := WriteMarkdown(&buf, sc, []Summary{s}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| v | 10.0 | 100.0 | 100.0 |", "| v | 50s | 1:1 | 0.800 | 0.200 | 0.600 | 0s | 5s | 10s | 100 | 4.00× |"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("markdown lacks %q:\n%s", want, buf.String())
		}
	}
}
