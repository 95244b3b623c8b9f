package frontend

// HistorySeconds is how far back the daemon keeps a pool's traffic for the
// cutover view: 15 minutes in 1 s buckets.
const HistorySeconds = 900

// History is a pool's recent traffic as the daemon's ring holds it: one
// value per second from Start (Unix seconds) for Seconds seconds, the last
// being the current, still filling second. The daemon builds a new one
// for every call; the console does not modify it.
type History struct {
	Start   int64 `json:"start"`
	Seconds int   `json:"seconds"`
	// Deployments are the pool's deployments that were picked or known
	// in the window, by name.
	Deployments []DeploymentSeries `json:"deployments"`
	// Failures are the failed picks per second by outcome (the outcome
	// label of prefixroute_picks_total: unavailable, drained, invalid, ...),
	// only the outcomes that occurred in the window.
	Failures []FailureSeries `json:"failures"`
	// Markers are the weight changes, ramp steps and ramp state changes
	// in the window, oldest first.
	Markers []Marker `json:"markers"`
	// InstancePicks is the picks per second of each instance over the last
	// InstanceRateSeconds, by instance id.
	InstancePicks map[string]float64 `json:"-"`
}

// InstanceRateSeconds is the span an instance's picks/s is averaged over.
const InstanceRateSeconds = 5

// DeploymentSeries is one deployment's successful picks per second, and the
// prefix blocks they carried and found cached on the chosen instance
// (Matched/Blocks is the hit ratio).
type DeploymentSeries struct {
	Deployment string   `json:"deployment"`
	Picks      []uint32 `json:"picks"`
	Blocks     []uint32 `json:"blocks"`
	Matched    []uint32 `json:"matched"`
}

// FailureSeries is one outcome's failed picks per second.
type FailureSeries struct {
	Outcome string   `json:"outcome"`
	Picks   []uint32 `json:"picks"`
}

// Marker is one change of the pool's configuration in force: At (Unix
// milliseconds), Kind "weights" (SetWeights, or a replica's) or "ramp" (a
// step, start, pause, resume, abort or the end of a ramp), a Label an
// operator reads ("ramp 3 step 2/5", "weights v7"), and the weight share of
// each deployment before and after.
type Marker struct {
	At             int64              `json:"at"`
	Kind           string             `json:"kind"`
	Label          string             `json:"label"`
	WeightsVersion uint64             `json:"weights_version"`
	Before         map[string]float64 `json:"before"`
	After          map[string]float64 `json:"after"`
}
