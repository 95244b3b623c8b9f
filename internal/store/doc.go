// Package store keeps the durable configuration of every pool: the
// deployment weights (with a version for compare-and-set) and the
// scheduling policy.
//
// # Durability
//
// A change (SetWeights, SetPolicy) returns only once it is on disk: the
// whole state is written to state.json.tmp, fsynced, renamed over
// state.json, and the directory fsynced; then one record is appended to
// audit.log and fsynced. Only then does memory change. If any step fails,
// the state file is put back as it was, memory keeps the old configuration,
// and the error wraps ErrPersist. A kill -9 at any point leaves either the
// old or the new state.json, never a mix. A crash after the rename and
// before the audit append leaves a change without its record: the next
// record's version then skips one, and its "old" shows the change.
//
// Open restores state.json. A file that cannot be read or parsed stops Open
// with ErrCorruptState naming the file and is never overwritten: move it
// aside to start empty. Open also takes an exclusive flock on the file LOCK
// in the data dir, so two daemons cannot share one data dir (ErrLocked).
//
// # State file
//
// state.json is indented JSON:
//
//	{
//	  "format": 1,
//	  "pools": {
//	    "chat": {
//	      "weights": {"a": 1, "b": 9},
//	      "weights_version": 3,
//	      "policy": {
//	        "strategy": "softmax",
//	        "lambda_h": 10,
//	        "delta_ms": 20,
//	        "threshold_ratio": 0.1,
//	        "threshold_min_ms": 20,
//	        "batch_wait_ms": 0,
//	        "block_size_tokens": 16,
//	        "default_prefill_tokens_per_second": 10000,
//	        "max_kv_usage": 0.95,
//	        "max_queue_ms": 0,
//	        "deployment_delta_ms": 0,
//	        "stale_after": "2s",
//	        "forget_after": "30s",
//	        "default_kv_capacity_blocks": 16384
//	      },
//	      "policy_version": 1,
//	      "updated_at": "2026-01-02T03:04:05.123456789Z"
//	    }
//	  }
//	}
//
// A pool may also hold "ramp": its last weight ramp (id, state, start
// weights, steps with their weights and "after" waits, steps applied,
// next_at or remaining, auto_hold, who started it and when).
//
// "format" is 1; any other value is refused, so an older daemon never
// misreads a newer file. An absent "weights" or "policy" means never set (the
// pool splits equally / the default policy applies). Within "policy",
// "strategy" is "softmax", "threshold" or "argmin", durations are Go
// duration strings ("2s", "1m30s", "250ms"), other fields are numbers, and
// an absent field takes its value from scheduler.DefaultPolicy. The result
// must pass scheduler.Policy.Validate. Unknown fields are refused rather
// than ignored, so that a misspelt field cannot silently fall back to its
// default. The store writes every field.
//
// # Seen pools
//
// seen.json holds the pools instances reported into, with when they were
// last seen (NoteSeen; the server notes every pool with instances once a
// sweep, 1 s):
//
//	{"format": 1, "pools": {"chat": "2026-01-02T03:04:05Z"}}
//
// After a restart, a pool in it is known before its instances report
// again: its picks answer "warming" (retryable) rather than "not found",
// and configuration writes to it need no allow_new_pool. It is bounded:
// a pool leaves it 24 h after it was last seen (Options.SeenTTL), and it
// holds at most 1024 pools (Options.MaxSeenPools), dropping those seen
// longest ago. A pool's time is rewritten at most once an hour (a quarter
// of the TTL when that is shorter), so the file costs about one fsynced
// write an hour per pool. A file that cannot be parsed stops Open with
// ErrCorruptState naming it, as state.json does; it is not audited.
//
// # Audit log
//
// audit.log holds one JSON object per line, one per successful change:
//
//	{"time":"2026-01-02T03:04:05.123456789Z","caller":"alice","pool":"chat","kind":"weights",
//	 "old":{"a":1},"new":{"a":1,"b":0},"version":4,"drain":false}
//
// time is RFC 3339 with nanoseconds in UTC; kind is "weights" or "policy";
// old and new are the weights (an object of numbers) or the policy (an
// object as in the state file), old null for the first change; version is
// the new weights or policy version; drain is true when every new weight is
// 0. A ramp's records have kind "ramp" (old and new are the ramp as in the
// state file, version its id) and a weights change made by a ramp step
// carries "ramp": {"id", "event", "step", "steps", "state"}, event being
// start, step, pause, resume, abort or done. The log only grows; rotating it is left to the operator (it is reopened
// for every record, so moving it aside is safe).
package store
