package rollout

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// ErrDrain: a weights change the drain guard refuses. The edge maps it to
// FailedPrecondition; the request's allow_drain lets it through.
var ErrDrain = errors.New("drain guard")

// Deployment is what the drain guard knows of one deployment the pool has
// seen (in its weights or its reports): the weight in force and how many
// of its instances are eligible (state ok) now.
type Deployment struct {
	Name     string
	Weight   float64
	Eligible int
}

// CheckWeights returns nil when weights may replace the weights in force
// of a pool holding deps without allow_drain, else an error wrapping
// ErrDrain that names the pool and the deployments (Problems).
func CheckWeights(pool string, deps []Deployment, weights map[string]float64) error {
	if p := Problems(deps, weights); p != "" {
		return fmt.Errorf("%w: pool %q: %s", ErrDrain, pool, p)
	}
	return nil
}

// Problems returns Drains's problem and Unseen's in one line, or "" when
// there is none. A pool that has seen no deployment yet has nothing to
// protect and no names to check against.
func Problems(deps []Deployment, weights map[string]float64) string {
	var problems []string
	if p := Drains(deps, weights); p != "" {
		problems = append(problems, p)
	}
	if p := Unseen(deps, weights); p != "" {
		problems = append(problems, p)
	}
	return strings.Join(problems, "; ")
}

// Drains returns what is wrong when weights would take all traffic away
// from the live deployments (weight above 0 and an eligible instance) and
// leave it to deployments with no eligible instance, or to none (every
// weight 0): picks would fail. It returns "" when no deployment is live
// now, or when weights keep one deployment with an eligible instance above
// 0.
func Drains(deps []Deployment, weights map[string]float64) string {
	eligible := make(map[string]int, len(deps))
	var live []string
	for _, d := range deps {
		eligible[d.Name] = d.Eligible
		if d.Weight > 0 && d.Eligible > 0 {
			live = append(live, d.Name)
		}
	}
	if len(live) == 0 {
		return ""
	}
	var empty []string
	for _, name := range slices.Sorted(maps.Keys(weights)) {
		if weights[name] <= 0 {
			continue
		}
		if eligible[name] > 0 {
			return ""
		}
		empty = append(empty, name)
	}
	slices.Sort(live)
	if len(empty) == 0 {
		return fmt.Sprintf("every weight would be 0, draining %s, which serve now: picks would fail", names(live))
	}
	return fmt.Sprintf("the traffic of %s (serving now) would all go to %s, with no eligible instance: picks would fail until %s",
		names(live), names(empty), startHint(empty))
}

// Unseen returns what is wrong when weights give a weight above 0 to a
// deployment not in deps: a typo, most likely. A weight of 0 pre-creates a
// deployment and is fine; so is any name while deps is empty.
func Unseen(deps []Deployment, weights map[string]float64) string {
	if len(deps) == 0 {
		return ""
	}
	known := make([]string, 0, len(deps))
	for _, d := range deps {
		known = append(known, d.Name)
	}
	var unseen []string
	for _, name := range slices.Sorted(maps.Keys(weights)) {
		if weights[name] > 0 && !slices.Contains(known, name) {
			unseen = append(unseen, name)
		}
	}
	if len(unseen) == 0 {
		return ""
	}
	slices.Sort(known)
	return fmt.Sprintf("the pool has never seen %s (it knows %s): check the name, or give it weight 0 to create it before its instances start",
		names(unseen), names(known))
}

func names(ds []string) string {
	q := make([]string, len(ds))
	for i, d := range ds {
		q[i] = fmt.Sprintf("%q", d)
	}
	return strings.Join(q, ", ")
}

func startHint(empty []string) string {
	if len(empty) == 1 {
		return "an instance of " + names(empty) + " reports ok"
	}
	return "an instance of one of them reports ok"
}
