package rollout

import (
	"errors"
	"maps"
	"testing"
	"time"
)

func TestPlan(t *testing.T) {
	tests := []struct {
		name               string
		start, target      map[string]float64
		duration, interval time.Duration
		want               []Step
	}{
		{
			name:  "A to B in 4 steps, shares move by a quarter",
			start: map[string]float64{"a": 1}, target: map[string]float64{"b": 1},
			duration: 4 * time.Minute, interval: time.Minute,
			want: []Step{
				{map[string]float64{"a": 0.75, "b": 0.25}, time.Minute},
				{map[string]float64{"a": 0.5, "b": 0.5}, time.Minute},
				{map[string]float64{"a": 0.25, "b": 0.75}, time.Minute},
				{map[string]float64{"a": 0, "b": 1}, time.Minute},
			},
		},
		{
			name:  "scales differ: 9:1 to 0:5 interpolates shares; the last step is the target exactly",
			start: map[string]float64{"a": 9, "b": 1}, target: map[string]float64{"a": 0, "b": 5},
			duration: 2 * time.Minute, interval: time.Minute,
			want: []Step{
				{map[string]float64{"a": 0.45, "b": 0.55}, time.Minute},
				{map[string]float64{"a": 0, "b": 5}, time.Minute},
			},
		},
		{
			name:  "duration not a multiple: the last wait is the remainder",
			start: map[string]float64{"a": 1, "b": 0}, target: map[string]float64{"a": 1, "b": 1},
			duration: 150 * time.Second, interval: time.Minute,
			want: []Step{
				{map[string]float64{"a": 0.833333333, "b": 0.166666667}, time.Minute},
				{map[string]float64{"a": 0.666666667, "b": 0.333333333}, time.Minute},
				{map[string]float64{"a": 1, "b": 1}, 30 * time.Second},
			},
		},
		{
			name:  "drained start: every step has the target's shares",
			start: map[string]float64{"a": 0}, target: map[string]float64{"a": 2, "b": 2},
			duration: 2 * time.Second, interval: time.Second,
			want: []Step{
				{map[string]float64{"a": 0.25, "b": 0.25}, time.Second},
				{map[string]float64{"a": 2, "b": 2}, time.Second},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Plan(tt.start, tt.target, tt.duration, tt.interval)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got %d steps, want %d: %v", len(got), len(tt.want), got)
			}
			for i := range got {
				if !maps.Equal(got[i].Weights, tt.want[i].Weights) || got[i].After != tt.want[i].After {
					t.Errorf("step %d = %v, want %v", i, got[i], tt.want[i])
				}
			}
		})
	}
}

func TestPlanLimits(t *testing.T) {
	a, b := map[string]float64{"a": 1}, map[string]float64{"b": 1}
	tests := []struct {
		name               string
		target             map[string]float64
		duration, interval time.Duration
		ok                 bool
	}{
		{"interval at the minimum", b, time.Second, time.Second, true},
		{"interval below the minimum", b, time.Second, time.Second - 1, false},
		{"duration shorter than interval", b, time.Second, 2 * time.Second, false},
		{"exactly MaxSteps", b, MaxSteps * time.Second, time.Second, true},
		{"one step over MaxSteps", b, MaxSteps*time.Second + 1, time.Second, false},
		{"duration at the maximum", b, MaxDuration, time.Hour, true},
		{"duration over the maximum", b, MaxDuration + time.Hour, 24 * time.Hour, false},
		{"all-zero target", map[string]float64{"b": 0}, time.Minute, time.Second, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Plan(a, tt.target, tt.duration, tt.interval)
			if tt.ok != (err == nil) {
				t.Fatalf("Plan(%v, %v) error = %v, want ok=%v", tt.duration, tt.interval, err, tt.ok)
			}
			if err != nil && !errors.Is(err, ErrInvalidRamp) {
				t.Errorf("error %v does not wrap ErrInvalidRamp", err)
			}
		})
	}
}

func TestCheckSteps(t *testing.T) {
	w := map[string]float64{"b": 1}
	many := make([]Step, MaxSteps+1)
	for i := range many {
		many[i] = Step{Weights: w}
	}
	tests := []struct {
		name  string
		steps []Step
		ok    bool
	}{
		{"one step applied at once", []Step{{w, 0}}, true},
		{"no steps", nil, false},
		{"too many", many, false},
		{"exactly MaxSteps", many[:MaxSteps], true},
		{"negative wait", []Step{{w, -1}}, false},
		{"wait at MaxWait", []Step{{w, MaxWait}}, true},
		{"wait over MaxWait", []Step{{w, MaxWait + 1}}, false},
		{"total over MaxDuration", []Step{{w, MaxWait}, {w, MaxWait}, {w, MaxWait}, {w, MaxWait}, {w, MaxWait}}, false},
		{"last step drains", []Step{{w, 0}, {map[string]float64{"b": 0}, 0}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckSteps(tt.steps)
			if tt.ok != (err == nil) {
				t.Fatalf("CheckSteps error = %v, want ok=%v", err, tt.ok)
			}
			if err != nil && !errors.Is(err, ErrInvalidRamp) {
				t.Errorf("error %v does not wrap ErrInvalidRamp", err)
			}
		})
	}
}
