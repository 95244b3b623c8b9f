package rollout

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"time"
)

// Plan returns the steps of a linear ramp from start to target over
// duration, one step every interval: n = ceil(duration/interval) steps, step
// k (1..n) due k*interval after the start, the last one at duration with
// exactly the target weights.
//
// Each step interpolates the deployments' shares of the total weight:
// step k gives deployment d the weight (1-k/n)*start_d/sum(start) +
// (k/n)*target_d/sum(target), so d's share of traffic moves by the same
// amount at every step. A deployment in only one of the maps has weight 0 in
// the other. A start of all zeros (a drained pool) contributes nothing: every
// step then has the target's shares. The target must have a weight above 0.
func Plan(start, target map[string]float64, duration, interval time.Duration) ([]Step, error) {
	switch {
	case interval < MinInterval:
		return nil, fmt.Errorf("%w: step interval %v is below the minimum %v", ErrInvalidRamp, interval, MinInterval)
	case duration < interval:
		return nil, fmt.Errorf("%w: duration %v is shorter than the step interval %v", ErrInvalidRamp, duration, interval)
	case duration > MaxDuration:
		return nil, fmt.Errorf("%w: duration %v is over the maximum %v", ErrInvalidRamp, duration, MaxDuration)
	}
	n64 := (int64(duration) + int64(interval) - 1) / int64(interval)
	if n64 > MaxSteps {
		return nil, fmt.Errorf("%w: duration %v in steps of %v makes %d steps; the maximum is %d (use a longer interval)",
			ErrInvalidRamp, duration, interval, n64, MaxSteps)
	}
	tsum := sum(target)
	if !(tsum > 0) {
		return nil, fmt.Errorf("%w: every target weight is 0; to drain the pool, set its weights instead", ErrInvalidRamp)
	}
	ssum := sum(start)
	names := slices.Sorted(maps.Keys(target))
	for d := range start {
		if _, ok := target[d]; !ok {
			names = append(names, d)
		}
	}
	n := int(n64)
	steps := make([]Step, n)
	for k := 1; k <= n; k++ {
		after := interval
		if k == n {
			after = duration - time.Duration(n-1)*interval
		}
		w := make(map[string]float64, len(names))
		if k == n {
			for _, d := range names {
				w[d] = target[d]
			}
		} else {
			f := float64(k) / float64(n)
			for _, d := range names {
				var s float64
				if ssum > 0 {
					s = start[d] / ssum
				}
				w[d] = roundWeight((1-f)*s + f*target[d]/tsum)
			}
		}
		steps[k-1] = Step{Weights: w, After: after}
	}
	return steps, nil
}

// roundWeight rounds a share to 9 significant decimals, so that the audit
// log and prefixctl show 0.3 rather than 0.30000000000000004.
func roundWeight(w float64) float64 {
	return math.Round(w*1e9) / 1e9
}

func sum(w map[string]float64) float64 {
	var s float64
	for _, v := range w {
		s += v
	}
	return s
}

// CheckSteps checks explicit steps against the limits: 1..MaxSteps steps,
// each wait in [0, MaxWait], their total at most MaxDuration, and the last
// step with a weight above 0. The weights themselves are the caller's to
// validate (the store checks them as it checks SetWeights).
func CheckSteps(steps []Step) error {
	if len(steps) == 0 {
		return fmt.Errorf("%w: no steps", ErrInvalidRamp)
	}
	if len(steps) > MaxSteps {
		return fmt.Errorf("%w: %d steps; the maximum is %d", ErrInvalidRamp, len(steps), MaxSteps)
	}
	var total time.Duration
	for i, s := range steps {
		if s.After < 0 || s.After > MaxWait {
			return fmt.Errorf("%w: steps[%d].after is %v; want 0 to %v", ErrInvalidRamp, i, s.After, MaxWait)
		}
		total += s.After
	}
	if total > MaxDuration {
		return fmt.Errorf("%w: the steps wait %v in all; the maximum is %v", ErrInvalidRamp, total, MaxDuration)
	}
	if !(sum(steps[len(steps)-1].Weights) > 0) {
		return fmt.Errorf("%w: every weight of the last step is 0; to drain the pool, set its weights instead", ErrInvalidRamp)
	}
	return nil
}
