package scheduler

import "hash/fnv"

// Short lanes. With Policy.ShortLanes = n > 0, the n lane candidates of
// each deployment with the smallest Instance.LaneKey form its short lane. A
// candidate is an instance that can serve picks at all: not RolePrefill,
// not disconnected, draining or unreachable (load and staleness do not
// move the lane). A deployment keeps at least one candidate out of its
// lane, so it has min(n, candidates − 1) lane instances.
//
// A lane instance refuses (ReasonShortLane, probability 0) a request whose
// PrefillMs on it exceeds Policy.ShortLaneMaxPrefillMs while an eligible
// instance of its deployment that the lane does not refuse exists (and,
// with a TTFT target some instance meets, is predicted to meet it); the
// strategy then runs among those. So a short prompt always finds instances
// that no long prompt occupies: a long prefill holds an engine for seconds
// and every prompt queued behind it waits, which is most of a median
// TTFT on long-context traffic (size-interval assignment; SIMULATION.md,
// issue 29). The lane only removes candidates: costs, predictions and the
// deployment level are unchanged.

// DefaultShortLaneMaxPrefillMs is Policy.ShortLaneMaxPrefillMs's default:
// 400 ms, about 8,000 new tokens at 20,000 tokens/s. On the Mooncake
// conversation trace (SIMULATION.md, issue 29) a lane of one instance in
// eight at 400 ms gave the lowest TTFT p50 of the settings tried.
const DefaultShortLaneMaxPrefillMs = 400.0

// LaneKey is the key that places the instance named id in its deployment's
// short lane (Instance.LaneKey): FNV-1a of the id, mixed. Pure; safe for
// concurrent use.
func LaneKey(id string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(id)) // never fails
	z := h.Sum64()
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// laneCandidate reports whether in can be in a short lane.
func laneCandidate(in *Instance) bool {
	return in.Role != RolePrefill && !in.Disconnected && !in.Draining && !in.Unreachable
}

// markLanes forms the short lane of every deployment of snap (only the
// one with index only when only >= 0; snap may then hold its instances
// alone) into d.deps, and clears the per-decision lane counts. A no-op
// when p.ShortLanes is 0.
func markLanes(p *Policy, snap *Snapshot, d *Decision, only int) {
	n := int(p.ShortLanes)
	if n == 0 {
		return
	}
	for k := range d.deps {
		if only < 0 || k == only {
			st := &d.deps[k]
			st.laneN, st.lanes, st.kept, st.keptMeet = 0, false, 0, 0
		}
	}
	for i := range snap.Instances {
		in := &snap.Instances[i]
		if (only >= 0 && in.Deployment != only) || !laneCandidate(in) || in.Deployment < 0 || in.Deployment >= len(d.deps) {
			continue
		}
		st := &d.deps[in.Deployment]
		// Insert into the n+1 smallest keys, ascending.
		j := st.laneN
		if j == n+1 {
			if in.LaneKey >= st.laneKeys[n] {
				continue
			}
			j = n
		} else {
			st.laneN++
		}
		for j > 0 && st.laneKeys[j-1] > in.LaneKey {
			st.laneKeys[j] = st.laneKeys[j-1]
			j--
		}
		st.laneKeys[j] = in.LaneKey
	}
	for k := range d.deps {
		if st := &d.deps[k]; (only < 0 || k == only) && st.laneN > 1 {
			lanes := min(n, st.laneN-1)
			st.lanes, st.laneCut = true, st.laneKeys[lanes-1]
		}
	}
}

// inLane reports whether in is in its deployment's short lane (st, after
// markLanes).
func (st *depState) inLane(in *Instance) bool {
	return st.lanes && laneCandidate(in) && in.LaneKey <= st.laneCut
}

// laneRefuses reports whether the short lane refuses r's request on its
// instance (before the check that another instance can take it).
func laneRefuses(p *Policy, r *InstanceResult) bool {
	return r.ShortLane && r.PrefillMs > p.ShortLaneMaxPrefillMs
}

// noteLane counts eligible instance r in its deployment's instances the
// lane does not refuse, with target its request's TTFT target (0: none).
func (st *depState) noteLane(p *Policy, r *InstanceResult, target float64) {
	if laneRefuses(p, r) {
		return
	}
	if st.kept == 0 || r.CostMs < st.minKept {
		st.minKept = r.CostMs
	}
	st.kept++
	if target > 0 && r.PredictedTTFTMs() <= target {
		if st.keptMeet == 0 || r.CostMs < st.minKeptMeet {
			st.minKeptMeet = r.CostMs
		}
		st.keptMeet++
	}
}
