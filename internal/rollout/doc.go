// Package rollout is the pure logic of weight ramps: the plan of a ramp
// (the weights of each step and when it is due) and its state machine
// (running, paused, done, aborted). It has no clock, no I/O and no
// goroutines: every function takes the time it acts at and returns a new
// value, so the store can persist the result before anything takes effect,
// and a restart resumes from the persisted value.
//
// A ramp moves a pool from its weights in force to a target over a number
// of steps. Step k is applied After[k] after step k-1 was applied (the
// first step After[0] after the ramp started), so a restart never skips a
// step: an overdue step is applied when the daemon is back, and the next one
// waits its full interval from then. While a ramp is paused the time left to
// its next step is kept and restarts counting on resume.
//
// A linear ramp (Plan) interpolates each deployment's share of the total
// weight, not the raw weights, so that the share of traffic moves in equal
// steps whatever the scales of the start and target weights.
package rollout
