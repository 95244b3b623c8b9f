package scheduler_test

import (
	"math"
	"testing"
	"time"

	"github.com/prefixroute/prefixroute/scheduler"
)

func TestDispatchHold(t *testing.T) {
	t0 := time.Unix(1000, 0)
	ms := time.Millisecond
	for _, tc := range []struct {
		name      string
		now, last time.Time
		spacing   time.Duration
		aheadMs   float64
		want      time.Duration
	}{
		{"off", t0, t0, 0, 100, 0},
		{"first pick for the instance", t0, time.Time{}, 10 * ms, 100, 0},
		{"previous answered just now", t0, t0, 10 * ms, 100, 10 * ms},
		{"previous answered 4 ms ago", t0, t0.Add(-4 * ms), 10 * ms, 100, 6 * ms},
		{"previous answered exactly spacing ago", t0, t0.Add(-10 * ms), 10 * ms, 100, 0},
		{"previous answered long ago", t0, t0.Add(-time.Second), 10 * ms, 100, 0},
		{"previous still held", t0, t0.Add(7 * ms), 10 * ms, 100, 17 * ms},
		{"capped by the queue ahead", t0, t0, 10 * ms, 2.5, 2500 * time.Microsecond},
		{"idle instance: no queue ahead", t0, t0, 10 * ms, 0, 0},
		{"NaN queue ahead", t0, t0, 10 * ms, math.NaN(), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := scheduler.DispatchHold(tc.now, tc.last, tc.spacing, tc.aheadMs); got != tc.want {
				t.Fatalf("DispatchHold = %v, want %v", got, tc.want)
			}
		})
	}
}
