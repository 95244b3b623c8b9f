package rollout

import (
	"errors"
	"testing"
)

// TestCheckWeights: the drain guard's rules at each edge, with the exact
// message.
func TestCheckWeights(t *testing.T) {
	serving := []Deployment{{Name: "A", Weight: 1, Eligible: 2}, {Name: "B", Weight: 1, Eligible: 1}, {Name: "C", Weight: 0, Eligible: 0}}
	tests := []struct {
		name    string
		deps    []Deployment
		weights map[string]float64
		want    string // "" = allowed
	}{
		{"new pool", nil, map[string]float64{"X": 1}, ""},
		{"keeps one serving", serving, map[string]float64{"A": 1, "C": 5}, ""},
		{"pre-create at 0", serving, map[string]float64{"A": 1, "B": 1, "D": 0}, ""},
		{"to a deployment that serves but had weight 0", []Deployment{{Name: "A", Weight: 1, Eligible: 1}, {Name: "B", Eligible: 1}},
			map[string]float64{"B": 1}, ""},
		{"nothing serves now", []Deployment{{Name: "A", Weight: 1}, {Name: "B"}}, map[string]float64{"B": 1}, ""},
		{"all zero", serving, map[string]float64{},
			`drain guard: pool "p": every weight would be 0, draining "A", "B", which serve now: picks would fail`},
		{"to the empty one", serving, map[string]float64{"C": 1},
			`drain guard: pool "p": the traffic of "A", "B" (serving now) would all go to "C", with no eligible instance: picks would fail until an instance of "C" reports ok`},
		{"typo", serving, map[string]float64{"A": 1, "D": 1},
			`drain guard: pool "p": the pool has never seen "D" (it knows "A", "B", "C"): check the name, or give it weight 0 to create it before its instances start`},
		{"both", serving, map[string]float64{"D": 1, "E": 2},
			`drain guard: pool "p": the traffic of "A", "B" (serving now) would all go to "D", "E", with no eligible instance: picks would fail until an instance of one of them reports ok; the pool has never seen "D", "E" (it knows "A", "B", "C"): check the name, or give it weight 0 to create it before its instances start`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckWeights("p", tc.deps, tc.weights)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want == "":
			case err == nil || err.Error() != tc.want || !errors.Is(err, ErrDrain):
				t.Fatalf("got %v\nwant %s", err, tc.want)
			}
		})
	}
}
