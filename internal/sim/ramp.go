package sim

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/prefixroute/prefixroute/internal/readiness"
	"github.com/prefixroute/prefixroute/internal/rollout"
)

// RampSpec is a linear weight ramp, as prefixctl ramp start makes one: from
// the weights in force at At to Target over Duration, one step every
// Interval. It is expanded with rollout.Plan, the daemon's own plan code,
// into steps of the weight schedule (step k at At + k·Interval, the last
// one at At + Duration with exactly Target). The explicit schedule keeps
// its steps up to At and after the ramp; one inside (At, At + Duration] is
// an error. A plain value.
type RampSpec struct {
	At       Duration           `yaml:"at"`
	Target   map[string]float64 `yaml:"target"`
	Duration Duration           `yaml:"duration"`
	Interval Duration           `yaml:"interval"`
}

// ReadinessSpec is a migration-readiness probe: at At router 0 is asked
// for its pool's Migration(From → To) estimate (state.Pool.Migration, the
// figures GetMigrationStatus returns), and the run then measures what To
// actually absorbs over Window after From's weight reaches 0 (the first
// step of the schedule after At that gives From the weight 0: the
// cutover). The routers' readiness trackers are configured with Window and
// Buckets, so the estimate and the measurement cover the same span. The
// probe needs the router picker (baselines have no tracker) and the
// simulated mode (live runs skip it). A plain value.
type ReadinessSpec struct {
	At   Duration `yaml:"at"`
	From string   `yaml:"from"`
	To   string   `yaml:"to"`
	// Window is the tracker's window and the span measured after the
	// cutover. Buckets divides it: default readiness.DefaultBuckets, or
	// the largest count below that which divides Window exactly.
	Window  Duration `yaml:"window"`
	Buckets int      `yaml:"buckets"`
	// TopK is how many hot prefixes only From holds the probe lists
	// (default readiness.DefaultTopK).
	TopK int `yaml:"top_k"`
}

// probeConfig is a ReadinessSpec resolved against a run's weight schedule.
type probeConfig struct {
	spec     ReadinessSpec
	at       time.Duration
	cut      time.Duration // the weight step that gives From the weight 0
	cutStep  int           // its index in the run's schedule
	window   time.Duration
	buckets  int
	from, to int // deployment indexes
}

// trackerConfig is the readiness tracker configuration of the routers.
func (p *probeConfig) trackerConfig() readiness.Config {
	return readiness.Config{Window: p.window, Buckets: p.buckets}
}

// weightsAt returns the weights in force at t: those of the last step at
// or before t (steps sorted by time; the first is at 0).
func weightsAt(steps []WeightStep, t time.Duration) map[string]float64 {
	var w map[string]float64
	for _, st := range steps {
		if st.At.D() <= t {
			w = st.Weights
		}
	}
	return w
}

// expandRamp returns the schedule steps (sorted, the first at 0) with the
// ramp's steps in place. Its errors name the ramp's field.
func expandRamp(sc *Scenario, steps []WeightStep, r *RampSpec) ([]WeightStep, error) {
	at, end := r.At.D(), r.At.D()+r.Duration.D()
	if at < 0 || at >= sc.Duration.D() {
		return nil, fmt.Errorf("ramp.at %v must be in [0, duration %v)", at, sc.Duration)
	}
	if len(r.Target) == 0 {
		return nil, fmt.Errorf("ramp.target must give at least one deployment a weight")
	}
	plan, err := rollout.Plan(weightsAt(steps, at), r.Target, r.Duration.D(), r.Interval.D())
	if err != nil {
		return nil, fmt.Errorf("ramp (duration %v, interval %v): %w", r.Duration, r.Interval, err)
	}
	for i, st := range steps {
		if st.At.D() > at && st.At.D() <= end {
			return nil, fmt.Errorf("ramp: weights[%d] at %v falls inside the ramp (%v, %v]; move it out or drop it", i, st.At, at, end)
		}
	}
	out := slices.Clone(steps)
	t := at
	for _, st := range plan {
		t += st.After
		out = append(out, WeightStep{At: Duration(t), Weights: st.Weights})
	}
	slices.SortStableFunc(out, func(a, b WeightStep) int { return int(a.At - b.At) })
	return out, nil
}

// resolveProbe checks the probe against the run's schedule (sorted, ramp
// expanded) and finds its cutover. Its errors name the field.
func resolveProbe(sc *Scenario, steps []WeightStep, p *ReadinessSpec) (*probeConfig, error) {
	idx := func(field, name string) (int, error) {
		i := slices.IndexFunc(sc.Deployments, func(d DeploymentSpec) bool { return d.Name == name })
		if i < 0 {
			return -1, fmt.Errorf("readiness.%s: unknown deployment %q", field, name)
		}
		return i, nil
	}
	from, err := idx("from", p.From)
	if err != nil {
		return nil, err
	}
	to, err := idx("to", p.To)
	if err != nil {
		return nil, err
	}
	if from == to {
		return nil, fmt.Errorf("readiness: from and to are the same deployment %q", p.From)
	}
	pc := &probeConfig{spec: *p, at: p.At.D(), window: p.Window.D(), buckets: p.Buckets, from: from, to: to, cutStep: -1}
	if pc.buckets == 0 && pc.window > 0 {
		pc.buckets = 1
		for b := readiness.DefaultBuckets; b > 1; b-- {
			if pc.window%time.Duration(b) == 0 && pc.window/time.Duration(b) >= time.Millisecond {
				pc.buckets = b
				break
			}
		}
	}
	switch {
	case pc.window <= 0:
		return nil, fmt.Errorf("readiness.window must be > 0 (the tracker's window and the span measured after the cutover)")
	case p.TopK < 0 || p.TopK > readiness.MaxTopK:
		return nil, fmt.Errorf("readiness.top_k must be in [0, %d], got %d", readiness.MaxTopK, p.TopK)
	case pc.at <= 0 || pc.at >= sc.Duration.D():
		return nil, fmt.Errorf("readiness.at %v must be in (0, duration %v)", pc.at, sc.Duration)
	}
	if err := pc.trackerConfig().Validate(); err != nil {
		return nil, fmt.Errorf("readiness.window/buckets: %w", err)
	}
	if w := weightsAt(steps, pc.at)[p.From]; !(w > 0) {
		return nil, fmt.Errorf("readiness: %s's weight is already 0 at readiness.at %v; probe before the step that drains it", p.From, pc.at)
	}
	for i, st := range steps {
		if st.At.D() > pc.at && st.Weights[p.From] == 0 {
			pc.cut, pc.cutStep = st.At.D(), i
			break
		}
	}
	if pc.cutStep < 0 {
		return nil, fmt.Errorf("readiness: no weight step after readiness.at %v gives %s the weight 0", pc.at, p.From)
	}
	if w := steps[pc.cutStep].Weights[p.To]; !(w > 0) {
		return nil, fmt.Errorf("readiness: %s's weight is 0 at the cutover (%v), so it takes none of %s's traffic", p.To, pc.cut, p.From)
	}
	if pc.cut+pc.window > sc.Duration.D() {
		return nil, fmt.Errorf("readiness: the window after the cutover (%v + %v) ends after the duration %v", pc.cut, pc.window, sc.Duration)
	}
	return pc, nil
}

// checkTarget validates a ramp's target weights like a schedule step's.
func checkTarget(where string, names map[string]bool, target map[string]float64) []error {
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(target)) {
		w := target[name]
		if !names[name] {
			errs = append(errs, fmt.Errorf("%s.target: unknown deployment %q", where, name))
		}
		if !(w >= 0) || math.IsInf(w, 0) {
			errs = append(errs, fmt.Errorf("%s.target: weight of %q must be finite and >= 0", where, name))
		}
	}
	return errs
}
